-- 0004_key_max_tokens: a key's cap on the output one request may ask
-- (max_tokens); the gateway clamps a request to it. NULL means no cap, as
-- for the other limits, so the keys that exist keep theirs: none.
ALTER TABLE api_keys ADD COLUMN max_tokens INTEGER CHECK (max_tokens > 0);
