-- Counts one request in an API key's sliding window, unless the window is full.
-- KEYS[1]  rl:{key_id}:rpm
-- ARGV[1]  limit per window, ARGV[2] window (ms), ARGV[3] a member unique to this request
-- Returns allow_request's reply.
return allow_request(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], now_ms())
