-- allow_request counts one request in an API key's sliding window, unless
-- the window is full.
-- key      rl:{key_id}:rpm, a ZSET of unique member -> admission time (ms)
-- limit    requests per window
-- window   the window (ms)
-- member   a member unique to this request
-- Returns {allowed 0|1, remaining, ms until the oldest counted request leaves (refused only)}.
local function allow_request(key, limit, window, member, now)
  -- A request admitted at t counts while now < t + window.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local n = redis.call('ZCARD', key)
  if n >= limit then
    -- Refused requests are not recorded: they consume nothing.
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return {0, 0, tonumber(oldest[2]) + window - now}
  end
  redis.call('ZADD', key, now, member)
  redis.call('PEXPIRE', key, window)
  return {1, limit - n - 1, 0}
end
