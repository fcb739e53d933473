-- 0002_ledger: what the two-phase ledger (runtime/ledger) needs beyond 0001.
--
-- teams.reserved_microcredits is the sum of the team's open reservations
-- (usage_ledger rows in 'reserved'). The ledger changes it in the same
-- transaction as each reserve, settle and cancel, so admission reads one
-- locked row instead of summing a ledger that grows without bound. The
-- available balance is balance_microcredits - reserved_microcredits.
--
-- usage_ledger keeps the prices and the output cap a request was admitted
-- with: a settle bills at the prices the reservation was computed from, even
-- if the model's row changes or goes while the request runs, and a retried
-- reserve returns the same cap.

ALTER TABLE teams
    ADD COLUMN reserved_microcredits BIGINT NOT NULL DEFAULT 0 CHECK (reserved_microcredits >= 0);

ALTER TABLE usage_ledger
    ADD COLUMN prompt_price_micro_per_mtok BIGINT NOT NULL DEFAULT 0 CHECK (prompt_price_micro_per_mtok >= 0);
ALTER TABLE usage_ledger
    ADD COLUMN completion_price_micro_per_mtok BIGINT NOT NULL DEFAULT 0 CHECK (completion_price_micro_per_mtok >= 0);
ALTER TABLE usage_ledger
    ADD COLUMN max_output_tokens BIGINT NOT NULL DEFAULT 0 CHECK (max_output_tokens >= 0);

-- Rows reserved before this migration take the model's current prices, and
-- the teams' open reservations are summed once.
UPDATE usage_ledger SET
    prompt_price_micro_per_mtok = COALESCE((SELECT m.prompt_price_micro_per_mtok FROM models m WHERE m.name = usage_ledger.model), 0),
    completion_price_micro_per_mtok = COALESCE((SELECT m.completion_price_micro_per_mtok FROM models m WHERE m.name = usage_ledger.model), 0)
WHERE status = 'reserved';
UPDATE teams SET reserved_microcredits = COALESCE((SELECT SUM(u.reserved_microcredits)
    FROM usage_ledger u WHERE u.team_id = teams.id AND u.status = 'reserved'), 0);
