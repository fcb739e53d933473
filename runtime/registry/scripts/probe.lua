-- Tells whether a node's record lives and which epoch it has or last had.
-- KEYS[1]  node:{id}, KEYS[2] node:{id}:epoch, KEYS[3] node:{id}:left
-- Returns {1, epoch} for a live record; {0, epoch, left} for a gone one,
-- where epoch is the latest registration's (the record that went, since
-- every registration writes its record in the same script) and left is 1
-- when that epoch deregistered rather than expired.
local e = redis.call('HGET', KEYS[1], 'epoch')
if e then
  return {1, tonumber(e), 0}
end
local latest = tonumber(redis.call('GET', KEYS[2]) or '0')
local left = tonumber(redis.call('GET', KEYS[3]) or '-1')
if left == latest then
  return {0, latest, 1}
end
return {0, latest, 0}
