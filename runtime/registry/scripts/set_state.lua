-- Sets a node's state if the caller's epoch still owns the record.
-- KEYS[1]  node:{id}
-- ARGV[1]  the caller's epoch, ARGV[2] the state
-- Returns 1 when set, 0 when the record is gone or has another epoch.
if not owns(KEYS[1], ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'state', ARGV[2])
return 1
