-- 0006_usage_daily: a rollup of settled usage per team, UTC day of
-- created_at, and model, so that a usage report over a month reads one row
-- per day and model instead of every ledger row of the month.
--
-- It is kept EXACT by triggers on usage_ledger, in the transaction that
-- changes the ledger row: whatever settles, unsettles or deletes a row (a
-- settle, the batched settle, the sweeper, a fixture) moves the rollup with
-- it, and a row that settles late is added to the day it was created on.
-- day is the UTC date as text (YYYY-MM-DD), as on SQLite. The sums are
-- numeric, whole numbers that never overflow (a bigint sum that did would
-- abort the settle that overflowed it), and readers cap them as they cap the
-- ledger's own sums (store.Dialect.SaturatingSum).
--
-- Settles change the rollup through a deferred row trigger: it runs at
-- commit, after the settle has locked and debited the team's row, so the
-- one hot rollup row per team, day and model is only ever locked by a
-- transaction that already holds its team's row. That adds no waiting the
-- team's row did not already impose and no new lock order (no deadlock).
-- Inserted rows (normally 'reserved', so a no-op) are folded per statement,
-- so a bulk load of settled rows costs one grouped upsert.
CREATE TABLE usage_daily (
    team_id           BIGINT NOT NULL REFERENCES teams (id),
    day               TEXT NOT NULL CHECK (day ~ '^\d{4}-\d{2}-\d{2}$'),
    model             TEXT NOT NULL,
    requests          NUMERIC NOT NULL DEFAULT 0,
    prompt_tokens     NUMERIC NOT NULL DEFAULT 0,
    completion_tokens NUMERIC NOT NULL DEFAULT 0,
    cost_microcredits NUMERIC NOT NULL DEFAULT 0,
    PRIMARY KEY (team_id, day, model)
);

INSERT INTO usage_daily (team_id, day, model, requests, prompt_tokens, completion_tokens, cost_microcredits)
SELECT team_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), model, COUNT(*),
    SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_microcredits)
FROM usage_ledger WHERE status = 'settled'
GROUP BY 1, 2, 3;

-- usage_daily_row moves the rollup by one ledger row's change.
CREATE FUNCTION usage_daily_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'settled' THEN
        UPDATE usage_daily SET requests = requests - 1,
            prompt_tokens = prompt_tokens - OLD.prompt_tokens,
            completion_tokens = completion_tokens - OLD.completion_tokens,
            cost_microcredits = cost_microcredits - OLD.cost_microcredits
        WHERE team_id = OLD.team_id AND day = to_char(OLD.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AND model = OLD.model;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.status = 'settled' THEN
        INSERT INTO usage_daily AS d (team_id, day, model, requests, prompt_tokens, completion_tokens, cost_microcredits)
        VALUES (NEW.team_id, to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), NEW.model, 1,
            NEW.prompt_tokens, NEW.completion_tokens, NEW.cost_microcredits)
        ON CONFLICT (team_id, day, model) DO UPDATE SET requests = d.requests + 1,
            prompt_tokens = d.prompt_tokens + EXCLUDED.prompt_tokens,
            completion_tokens = d.completion_tokens + EXCLUDED.completion_tokens,
            cost_microcredits = d.cost_microcredits + EXCLUDED.cost_microcredits;
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER usage_daily_update AFTER UPDATE ON usage_ledger
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.status = 'settled' OR NEW.status = 'settled')
    EXECUTE FUNCTION usage_daily_row();
CREATE CONSTRAINT TRIGGER usage_daily_delete AFTER DELETE ON usage_ledger
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.status = 'settled')
    EXECUTE FUNCTION usage_daily_row();

-- usage_daily_insert folds one statement's inserted settled rows.
CREATE FUNCTION usage_daily_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_daily AS d (team_id, day, model, requests, prompt_tokens, completion_tokens, cost_microcredits)
    SELECT team_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), model, COUNT(*),
        SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_microcredits)
    FROM inserted WHERE status = 'settled'
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (team_id, day, model) DO UPDATE SET requests = d.requests + EXCLUDED.requests,
        prompt_tokens = d.prompt_tokens + EXCLUDED.prompt_tokens,
        completion_tokens = d.completion_tokens + EXCLUDED.completion_tokens,
        cost_microcredits = d.cost_microcredits + EXCLUDED.cost_microcredits;
    RETURN NULL;
END
$$;

CREATE TRIGGER usage_daily_insert AFTER INSERT ON usage_ledger
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION usage_daily_insert();
