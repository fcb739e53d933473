-- Records a heartbeat if the caller's epoch still owns the record.
-- KEYS[1]  node:{id}, KEYS[2] node:{id}:epoch
-- ARGV[1]  the caller's epoch
-- ARGV[2]  record TTL (ms)
-- ARGV[3]  epoch counter retention (ms)
-- ARGV[4]  gpu_util, or '' when the node sent none (the field is removed)
-- ARGV[5..] load fields as field, value pairs
-- Returns {1, now_ms}, or {0, 0} when the record is gone or has another epoch.
local node, counter = KEYS[1], KEYS[2]
if not owns(node, ARGV[1]) then
  return {0, 0}
end
local now = now_ms()
redis.call('HSET', node, 'beat_ms', now, unpack(ARGV, 5))
if ARGV[4] == '' then
  redis.call('HDEL', node, 'gpu_util')
else
  redis.call('HSET', node, 'gpu_util', ARGV[4])
end
redis.call('PEXPIRE', node, ARGV[2])
redis.call('PEXPIRE', counter, ARGV[3])
return {1, now}
