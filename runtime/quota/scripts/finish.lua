-- Ends a request's use of its key's limits: gives back its stream slot and
-- counts its tokens on the key's day, once per request (as tokens_count.lua).
-- KEYS[1]  streams:{key_id}
-- KEYS[2]  tpd:{key_id}:{yyyymmdd}
-- KEYS[3]  tpd:{key_id}:counted:{request_id}, the request's marker
-- ARGV[1]  request id
-- ARGV[2]  '1' to give back the slot
-- ARGV[3]  tokens to count; 0 counts nothing
-- ARGV[4]  ms until 48 h after the day's start (the counter's expiry)
-- ARGV[5]  ms the marker lives
-- Returns 1 when the tokens were counted now, 0 otherwise.
if ARGV[2] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
end
if tonumber(ARGV[3]) > 0 and redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[5]) then
  redis.call('INCRBY', KEYS[2], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return 1
end
return 0
