-- 0003_admin_idempotency: which resource an admin Idempotency-Key created,
-- so a create retried against another gateway replica finds the first
-- answer. fingerprint is a hash of the request body: the same key with a
-- different body is a conflict.
CREATE TABLE admin_idempotency (
    scope       TEXT NOT NULL,
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    resource_id BIGINT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (scope, key)
);
