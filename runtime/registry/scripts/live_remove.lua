-- Removes a node from nodes:live unless it was indexed again since the
-- caller read it (a newer beat raised its score).
-- KEYS[1]  nodes:live
-- ARGV[1]  node id, ARGV[2] the score the caller saw
-- Returns 1 when removed.
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) <= tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
