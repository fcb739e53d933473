-- Appends a request to a model's queue.
-- KEYS[1]  q:{model}, KEYS[2] q:{model}:seq
-- ARGV[1]  request id
-- ARGV[2]  limit (ms): the entry's deadline is now + limit
-- ARGV[3]  max depth, 0 for none
-- ARGV[4]  wake channel
-- Returns {1, entry, seq}, or {0} when the queue is full.
local q, seqkey = KEYS[1], KEYS[2]
local limit, maxdepth = tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
if purge_front(q, now) > 0 then
  wake_head(q, ARGV[4])
end
if maxdepth > 0 and redis.call('ZCARD', q) >= maxdepth then
  purge_all(q, now)
  if redis.call('ZCARD', q) >= maxdepth then
    return {0}
  end
end
local seq = redis.call('INCR', seqkey)
local entry = ARGV[1] .. ' ' .. (now + limit)
redis.call('ZADD', q, seq, entry)
keep_for({q, seqkey}, limit)
return {1, entry, seq}
