-- A queue entry is "<request_id> <deadline_ms>", scored by its arrival
-- number, so the ZSET's order is arrival order and an entry that steps out
-- to try can go back to exactly its place.

local function deadline_of(entry)
  return tonumber(string.match(entry, ' (%d+)$')) or 0
end

local function id_of(entry)
  return string.match(entry, '^(%S+)') or entry
end

local function head_of(q)
  return redis.call('ZRANGE', q, 0, 0)[1]
end

-- purge_front removes expired entries from the front of the queue, where
-- the oldest wait (a crashed gateway's entries end here), and returns how
-- many it removed.
local function purge_front(q, now)
  local n = 0
  while true do
    local head = head_of(q)
    if not head or deadline_of(head) > now then
      return n
    end
    redis.call('ZREM', q, head)
    n = n + 1
  end
end

-- purge_all removes every expired entry, wherever it waits.
local function purge_all(q, now)
  for _, e in ipairs(redis.call('ZRANGE', q, 0, -1)) do
    if deadline_of(e) <= now then
      redis.call('ZREM', q, e)
    end
  end
end

-- wake_head tells the head of the queue, on whichever gateway it waits,
-- that it may try now, and returns the head (false when the queue is empty).
local function wake_head(q, channel)
  local head = head_of(q)
  if head then
    redis.call('PUBLISH', channel, id_of(head))
  end
  return head
end

-- keep_for makes the keys live at least ms longer, so they outlive their
-- newest entry and vanish once a crashed gateway's entries are all stale.
local function keep_for(keys, ms)
  for _, k in ipairs(keys) do
    if redis.call('PTTL', k) < ms then
      redis.call('PEXPIRE', k, ms)
    end
  end
end
