-- Removes a waiting entry (its client left or its limit passed).
-- KEYS[1]  q:{model}
-- ARGV[1]  entry, ARGV[2] wake channel
-- Returns 1 when the entry was there.
local q, entry = KEYS[1], ARGV[1]
local now = now_ms()
local was_head = head_of(q) == entry
local removed = redis.call('ZREM', q, entry)
if purge_front(q, now) > 0 or was_head then
  wake_head(q, ARGV[2])
end
return removed
