-- 0007_usage_daily_by_statement: the batched settle (ledger/batch.go)
-- folds the rows it settles into usage_daily itself, in one grouped upsert
-- per statement, instead of one deferred trigger call per row. It marks its
-- transaction with the setting llmplat.rollup_by_statement; the row trigger
-- then skips the rows that statement moved out of 'reserved', and only
-- those. Every other change of a ledger row (the one-request settle, the
-- sweeper, a correction, a delete) still moves the rollup through the
-- trigger, so the rollup stays exact whatever path settles a row.
--
-- The batch's upsert reads the rows after its teams' rows are locked and
-- debited, so the rollup row is still only ever locked by a transaction
-- that holds its team's row (see 0006).
CREATE OR REPLACE FUNCTION usage_daily_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = 'reserved'
        AND current_setting('llmplat.rollup_by_statement', true) = 'on' THEN
        RETURN NULL; -- the settling statement folded this row itself
    END IF;
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
