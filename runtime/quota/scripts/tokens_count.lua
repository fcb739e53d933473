-- Counts a settled request's tokens on its key's day, once per request.
-- KEYS[1]  tpd:{key_id}:{yyyymmdd}
-- KEYS[2]  tpd:{key_id}:counted:{request_id}, the request's marker
-- ARGV[1]  tokens
-- ARGV[2]  ms until 48 h after the day's start (the counter's expiry)
-- ARGV[3]  ms the marker lives: longer than any second settle can come
-- Returns {1, total} when counted now, {0, total} when counted before.
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[3]) == false then
  return {0, tonumber(redis.call('GET', KEYS[1]) or '0')}
end
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, total}
