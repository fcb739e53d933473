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
-- ARGV[8]  tickets wanted besides the request (0: none), ARGV[9] their
--          member prefix, unique to this call, ARGV[10] their life (ms)
-- Returns {refused, active slots, tokens used today, rpm remaining, retry ms,
-- tickets} with refused 0 (admitted), 1 (streams), 2 (tokens per day) or 3
-- (rpm).
--
-- An admitted request may take tickets for the gateway replica that sent
-- it: each holds a stream slot and a place in the minute, taken now, so the
-- replica can admit that many more requests of the key without a round
-- trip (quota.Limiter's lease). A ticket's slot lives ARGV[10] ms unless a
-- request claims it (claim.lua); its place in the minute is stamped at the
-- end of that life, so it counts a full window after any request that used
-- it. Tickets take at most a quarter of what the limits have left, so a
-- key near its limits is admitted one request at a time, as without them.
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
local tickets = tonumber(ARGV[8])
if max_streams > 0 then
  tickets = math.min(tickets, math.floor((max_streams - active) / 4))
end
if rpm > 0 then
  tickets = math.min(tickets, math.floor(remaining / 4))
end
if tickets > 0 then
  local life = tonumber(ARGV[10])
  for i = 1, tickets do
    if max_streams > 0 then
      redis.call('ZADD', KEYS[1], now + life, ARGV[9] .. i)
    end
    if rpm > 0 then
      redis.call('ZADD', KEYS[2], now + life, ARGV[9] .. i)
    end
  end
  if rpm > 0 then
    redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[6]) + life)
    remaining = remaining - tickets
  end
  if max_streams > 0 then
    active = active + tickets
  end
else
  tickets = 0
end
return {0, active, used, remaining, 0, tickets}
