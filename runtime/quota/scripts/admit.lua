-- Admits one request against all of an API key's limits in one round trip,
-- in the gateway's order: the stream slot, the tokens of the day (read
-- only), then requests per minute (the one check that cannot be undone, so
-- it runs last). A refusal gives back the slot this call took, so a refused
-- request holds nothing and, unless the rpm window refused it, is not
-- counted.
-- KEYS[1]  streams:{key_id}, KEYS[2] rl:{key_id}:rpm, KEYS[3] tpd:{key_id}:{day}
-- ARGV[1]  request id
-- ARGV[2]  max streams (0: no limit), ARGV[3] max stream duration (ms)
-- ARGV[4]  tokens per day (0: no limit)
-- ARGV[5]  rpm (0: no limit), ARGV[6] window (ms), ARGV[7] a member unique to this request
-- Returns {refused, active slots, tokens used today, rpm remaining, retry ms}
-- with refused 0 (admitted), 1 (streams), 2 (tokens per day) or 3 (rpm).
local now = now_ms()
local max_streams, tpd, rpm = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local active = 0
local took = false
if max_streams > 0 then
  local held = redis.call('ZSCORE', KEYS[1], ARGV[1])
  local r = acquire_stream(KEYS[1], ARGV[1], max_streams, tonumber(ARGV[3]), now)
  if r[1] == 0 then
    return {1, r[2], 0, 0, r[3]}
  end
  active, took = r[2], not held
end
local used = 0
if tpd > 0 then
  used = tonumber(redis.call('GET', KEYS[3]) or '0')
  if used >= tpd then
    if took then
      redis.call('ZREM', KEYS[1], ARGV[1])
    end
    return {2, active, used, 0, 0}
  end
end
local remaining = 0
if rpm > 0 then
  local r = allow_request(KEYS[2], rpm, tonumber(ARGV[6]), ARGV[7], now)
  if r[1] == 0 then
    if took then
      redis.call('ZREM', KEYS[1], ARGV[1])
    end
    return {3, active, used, 0, r[3]}
  end
  remaining = r[2]
end
return {0, active, used, remaining, 0}
