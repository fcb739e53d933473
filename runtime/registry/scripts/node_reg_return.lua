-- Gives back one registration a node was counted for and then refused
-- by a later check (the cluster-wide rate): a storm's refusals must not
-- spend the node's own allowance.
-- KEYS[1]  node:{id}:regs
-- The count keeps its expiry, and never goes below zero.
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n > 0 then
  redis.call('DECR', KEYS[1])
end
return 0
