-- Claims a ticket's stream slot for a request (see admit.lua): the slot
-- becomes the request's, with the request's deadline, so that releasing and
-- refreshing it by request id work as for a slot Admit took directly.
-- KEYS[1]  streams:{key_id}
-- ARGV[1]  the ticket, ARGV[2] the request id, ARGV[3] max stream duration (ms)
-- Returns 1 when claimed, 0 when the ticket's life had ended.
local now = now_ms()
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
