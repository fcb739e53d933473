-- Appends a request to a model's queue.
-- KEYS[1]  q:{model}, KEYS[2] q:{model}:seq
-- ARGV[1]  request id
-- ARGV[2]  limit (ms): the entry's deadline is now + limit
-- ARGV[3]  wake channel
-- Returns {entry, seq}.
local q, seqkey = KEYS[1], KEYS[2]
local limit = tonumber(ARGV[2])
local now = now_ms()
if purge_front(q, now) > 0 then
  wake_head(q, ARGV[3])
end
local seq = redis.call('INCR', seqkey)
local entry = ARGV[1] .. ' ' .. (now + limit)
redis.call('ZADD', q, seq, entry)
keep_for({q, seqkey}, limit)
return {entry, seq}
