-- Puts an entry whose try failed back at its place in the queue.
-- KEYS[1]  q:{model}, KEYS[2] q:{model}:seq, KEYS[3] q:{model}:missed
-- ARGV[1]  entry, ARGV[2] its seq
-- Returns 0 when its deadline passed meanwhile; 1 when it is back;
--         2 when it is back and a wake-up came while it tried (try again).
local now = now_ms()
local left = deadline_of(ARGV[1]) - now
if left <= 0 then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
keep_for({KEYS[1], KEYS[2]}, left)
if redis.call('DEL', KEYS[3]) == 1 then
  return 2
end
return 1
