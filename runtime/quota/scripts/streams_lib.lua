-- acquire_stream takes a stream slot of one API key for a request.
-- key      streams:{key_id}, a ZSET of request id -> slot deadline (ms)
-- id       the request id
-- max      max streams
-- ttl      max stream duration (ms): the slot's lifetime and the key's TTL
-- Returns {allowed 0|1, active slots, ms until the soonest deadline (refused only)}.
local function acquire_stream(key, id, max, ttl, now)
  -- Slots whose holder never released them (a crash, a lost release) end here.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local held = redis.call('ZSCORE', key, id)
  redis.call('ZADD', key, now + ttl, id)
  local active = redis.call('ZCARD', key)
  if not held and active > max then
    -- Over the limit: take back our own add.
    redis.call('ZREM', key, id)
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return {0, active - 1, tonumber(first[2]) - now}
  end
  -- The newest slot has the latest deadline, so the key outlives every slot.
  redis.call('PEXPIRE', key, ttl)
  return {1, active, 0}
end
