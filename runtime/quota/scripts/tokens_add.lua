-- Adds tokens to an API key's counter for one UTC day.
-- KEYS[1]  tpd:{key_id}:{yyyymmdd}
-- ARGV[1]  tokens (may be negative)
-- ARGV[2]  ms until 48 h after the day's start: every call on that day's
--          key aims at the same expiry
-- Returns the new total.
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return total
