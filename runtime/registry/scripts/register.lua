-- Registers a node under a new epoch, replacing any record it had.
-- KEYS[1]  node:{id}, KEYS[2] node:{id}:epoch, KEYS[3] node:{id}:left
-- ARGV[1]  record TTL (ms)
-- ARGV[2]  epoch counter retention (ms)
-- ARGV[3..] the record's static fields as field, value pairs
-- Returns {epoch, now_ms}.
local node, counter, left = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local epoch = redis.call('INCR', counter)
redis.call('PEXPIRE', counter, ARGV[2])
-- A new connection starts a new record: nothing of the old one's
-- heartbeats (gpu_util, draining) carries over.
redis.call('DEL', node, left)
redis.call('HSET', node, 'epoch', epoch, 'state', 'active',
  'registered_ms', now, 'beat_ms', now, unpack(ARGV, 3))
redis.call('PEXPIRE', node, ARGV[1])
return {epoch, now}
