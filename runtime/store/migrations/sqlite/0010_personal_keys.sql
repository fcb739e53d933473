-- 0010_personal_keys: migrations/postgres/0010_personal_keys.sql for SQLite.
ALTER TABLE teams ADD COLUMN self_service_keys BOOLEAN NOT NULL DEFAULT FALSE CHECK (self_service_keys IN (0, 1));
ALTER TABLE teams ADD COLUMN personal_key_max_days INTEGER NOT NULL DEFAULT 90
    CHECK (personal_key_max_days BETWEEN 1 AND 3650);
ALTER TABLE api_keys ADD COLUMN origin TEXT NOT NULL DEFAULT 'admin' CHECK (origin IN ('admin', 'console'));
ALTER TABLE api_keys ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN revoked_by TEXT NOT NULL DEFAULT '';
