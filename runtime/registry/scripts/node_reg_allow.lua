-- Admits one registration of a node within its window.
-- KEYS[1]  node:{id}:regs, the count of the node's admitted registrations
-- ARGV[1]  registrations allowed per window, ARGV[2] the window (ms)
-- Returns {1, 0} when admitted (and counted), or {0, wait_ms} when the
-- window is full: a refusal is not counted, so a node that keeps trying
-- does not push its own window further out.
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n >= tonumber(ARGV[1]) then
  local wait = redis.call('PTTL', KEYS[1])
  if wait < 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    wait = tonumber(ARGV[2])
  end
  return {0, wait}
end
n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {1, 0}
