-- now_ms is the Redis server's clock in Unix milliseconds, so that every
-- orchestrator replica reads the same time. Millisecond values (13 digits)
-- stay exact through Lua's number-to-string conversions.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- owns reports whether the record at key exists and carries epoch.
local function owns(key, epoch)
  local cur = redis.call('HGET', key, 'epoch')
  return cur and tonumber(cur) == tonumber(epoch)
end
