-- Takes a stream slot of one API key.
-- KEYS[1]  streams:{key_id}
-- ARGV[1]  request id, ARGV[2] max streams, ARGV[3] max stream duration (ms)
-- Returns acquire_stream's reply.
return acquire_stream(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), now_ms())
