-- 0008_team_released: migrations/postgres/0008_team_released.sql for SQLite.
ALTER TABLE teams ADD COLUMN released_at TIMESTAMP;
