-- 0002_ledger: the columns of migrations/postgres/0002_ledger.sql for SQLite
-- (comments on their meaning are there).

ALTER TABLE teams
    ADD COLUMN reserved_microcredits BIGINT NOT NULL DEFAULT 0 CHECK (reserved_microcredits >= 0);

ALTER TABLE usage_ledger
    ADD COLUMN prompt_price_micro_per_mtok BIGINT NOT NULL DEFAULT 0 CHECK (prompt_price_micro_per_mtok >= 0);
ALTER TABLE usage_ledger
    ADD COLUMN completion_price_micro_per_mtok BIGINT NOT NULL DEFAULT 0 CHECK (completion_price_micro_per_mtok >= 0);
ALTER TABLE usage_ledger
    ADD COLUMN max_output_tokens BIGINT NOT NULL DEFAULT 0 CHECK (max_output_tokens >= 0);

UPDATE usage_ledger SET
    prompt_price_micro_per_mtok = COALESCE((SELECT m.prompt_price_micro_per_mtok FROM models m WHERE m.name = usage_ledger.model), 0),
    completion_price_micro_per_mtok = COALESCE((SELECT m.completion_price_micro_per_mtok FROM models m WHERE m.name = usage_ledger.model), 0)
WHERE status = 'reserved';
UPDATE teams SET reserved_microcredits = COALESCE((SELECT SUM(u.reserved_microcredits)
    FROM usage_ledger u WHERE u.team_id = teams.id AND u.status = 'reserved'), 0);
