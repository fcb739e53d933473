-- Tells a waiting entry where it stands; at the head it steps out to try.
-- KEYS[1]  q:{model}, KEYS[2] q:{model}:seq, KEYS[3] q:{model}:missed
-- ARGV[1]  entry, ARGV[2] its seq, ARGV[3] wake channel
-- Returns {0, 0}: it was the head and has left the queue to try;
--         {1, ms until the head's deadline}: it waits behind others;
--         {2, 0}: its deadline passed and it is gone.
local q, entry = KEYS[1], ARGV[1]
local now = now_ms()
local purged = purge_front(q, now)
local result
if deadline_of(entry) <= now then
  redis.call('ZREM', q, entry)
  result = {2, 0}
else
  if not redis.call('ZSCORE', q, entry) then
    -- The queue lost a live entry (Redis restarted or was flushed): put it
    -- back at its old place rather than wait for a turn that cannot come.
    redis.call('ZADD', q, ARGV[2], entry)
    keep_for({q, KEYS[2]}, deadline_of(entry) - now)
  end
  local head = head_of(q)
  if head == entry then
    redis.call('ZREM', q, entry)
    -- This try answers every wake-up so far.
    redis.call('DEL', KEYS[3])
    result = {0, 0}
  else
    result = {1, deadline_of(head) - now}
  end
end
-- Stale heads were removed: the new head (someone else) may try.
if purged > 0 and result[1] ~= 0 then
  wake_head(q, ARGV[3])
end
return result
