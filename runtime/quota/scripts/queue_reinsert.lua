-- Puts an entry whose try failed back at its place in the queue.
-- KEYS[1]  q:{model}, KEYS[2] q:{model}:seq
-- ARGV[1]  entry, ARGV[2] its seq
-- Returns 1 when it is back, 0 when its deadline passed meanwhile.
local now = now_ms()
local left = deadline_of(ARGV[1]) - now
if left <= 0 then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
keep_for({KEYS[1], KEYS[2]}, left)
return 1
