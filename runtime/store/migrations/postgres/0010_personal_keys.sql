-- 0010_personal_keys: self-service keys within what Terraform owns.
-- A team may let its members mint personal keys in the console
-- (self_service_keys, off unless the platform turns it on), each expiring
-- within personal_key_max_days. A key says where it was made: 'admin' (the
-- admin API, so Terraform or the platform team: managed, read-only in the
-- console) or 'console' (a member's personal key); created_by and
-- revoked_by name who did it (a key prefix or a JWT subject), for the
-- team's audit list. The keys that exist were made through the admin API.
ALTER TABLE teams ADD COLUMN self_service_keys BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE teams ADD COLUMN personal_key_max_days INTEGER NOT NULL DEFAULT 90
    CHECK (personal_key_max_days BETWEEN 1 AND 3650);
ALTER TABLE api_keys ADD COLUMN origin TEXT NOT NULL DEFAULT 'admin' CHECK (origin IN ('admin', 'console'));
ALTER TABLE api_keys ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN revoked_by TEXT NOT NULL DEFAULT '';
