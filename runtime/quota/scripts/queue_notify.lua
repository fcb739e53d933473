-- Wakes the head of a model's queue: capacity may have freed.
-- KEYS[1]  q:{model}
-- ARGV[1]  wake channel
-- Returns 1 when a head was woken, 0 when the queue is empty.
purge_front(KEYS[1], now_ms())
if wake_head(KEYS[1], ARGV[1]) then
  return 1
end
return 0
