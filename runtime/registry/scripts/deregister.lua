-- Deletes a node's record if the caller's epoch still owns it, and leaves
-- a tombstone saying that epoch left on purpose.
-- KEYS[1]  node:{id}, KEYS[2] node:{id}:left
-- ARGV[1]  the caller's epoch, ARGV[2] tombstone retention (ms)
-- Returns {1, beat_ms of the deleted record}, or {0, 0}.
local node, left = KEYS[1], KEYS[2]
if not owns(node, ARGV[1]) then
  return {0, 0}
end
local beat = tonumber(redis.call('HGET', node, 'beat_ms')) or 0
redis.call('DEL', node)
redis.call('SET', left, ARGV[1], 'PX', ARGV[2])
return {1, beat}
