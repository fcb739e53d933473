-- Counts one registration attempt in the current second of the server.
-- KEYS[1]  reg:{unix_second} for the second the caller believes it is
-- ARGV[1]  that second, ARGV[2] the counter's TTL (ms)
-- Returns {n, now_ms}: n is this attempt's number within the second, or -1
-- (nothing counted) when the server is in another second than the key's.
local now = now_ms()
if math.floor(now / 1000) ~= tonumber(ARGV[1]) then
  return {-1, now}
end
local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {n, now}
