-- Wakes the head of a model's queue: capacity may have freed.
-- KEYS[1]  q:{model}, KEYS[2] q:{model}:seq, KEYS[3] q:{model}:missed
-- ARGV[1]  wake channel, ARGV[2] ms a missed wake-up is kept
-- Returns 1 when a head was woken, 0 when the queue is empty.
purge_front(KEYS[1], now_ms())
-- A head that stepped out to try is in no queue and hears nothing: the mark
-- sends it straight back to try when it returns. Only a queue in use (its
-- seq lives) is marked, so a notify on an idle model writes nothing.
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[2])
end
if wake_head(KEYS[1], ARGV[1]) then
  return 1
end
return 0
