-- Moves a held stream slot's deadline to now + max stream duration.
-- KEYS[1]  streams:{key_id}
-- ARGV[1]  request id
-- ARGV[2]  max stream duration (ms)
-- Returns 1 when the slot was held, 0 when it had expired or was released.
local key, id, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if not redis.call('ZSCORE', key, id) then
  return 0
end
redis.call('ZADD', key, now + ttl, id)
redis.call('PEXPIRE', key, ttl)
return 1
