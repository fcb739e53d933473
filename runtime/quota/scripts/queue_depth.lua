-- Counts a model's live queue entries, removing every expired one.
-- KEYS[1]  q:{model}
-- ARGV[1]  wake channel
-- Returns the number of waiting entries.
local q = KEYS[1]
local before = head_of(q)
purge_all(q, now_ms())
local after = head_of(q)
if after and after ~= before then
  wake_head(q, ARGV[1])
end
return redis.call('ZCARD', q)
