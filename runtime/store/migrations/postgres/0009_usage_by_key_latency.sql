-- 0009_usage_by_key_latency: usage per API key, and the latency the teams
-- experienced, both kept exact in the transaction that settles (see 0006).
--
-- usage_ledger gains the timing the gateway saw, set by the settle that
-- relayed an answer (NULL otherwise: a sweep, a replay, a cancel):
-- ttft_ms, from the request's arrival to the engine's first event;
-- generation_ms, from that event to the answer's end; queue_ms, the wait in
-- the model's queue (0 when an engine had room at once).
--
-- usage_daily's key gains key_id, so the rollup answers "which key spent
-- it" as well as "which model" from the same rows.
--
-- latency_hourly is a rollup per team, UTC hour of created_at
-- ('YYYY-MM-DD HH'), model and key: the settled requests, the timed ones,
-- their completion tokens and generation time (tokens per second is their
-- ratio), and fixed histograms of TTFT and queue wait in milliseconds with
-- the bucket bounds 10, 25, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000,
-- 3000, 5000, 10000, 30000 (b00 is [0, 10), b15 is [30000, ∞)); the
-- ledger's latency.go holds the same bounds, and a test checks that the two
-- agree. The hour is the grain because the platform's pages ask for the last
-- hour; a team's range reads at most 24 rows a day per model and key.
-- Both rollups move in the one trigger function (and the batched settle's
-- statement folds both, 0007), so their rows, like usage_daily's, are only
-- ever locked by a transaction that holds its team's row.
ALTER TABLE usage_ledger ADD COLUMN ttft_ms BIGINT CHECK (ttft_ms >= 0);
ALTER TABLE usage_ledger ADD COLUMN generation_ms BIGINT CHECK (generation_ms >= 0);
ALTER TABLE usage_ledger ADD COLUMN queue_ms BIGINT CHECK (queue_ms >= 0);
ALTER TABLE usage_ledger ADD CONSTRAINT usage_ledger_timing_check
    CHECK ((ttft_ms IS NULL) = (generation_ms IS NULL) AND (ttft_ms IS NULL) = (queue_ms IS NULL));

-- usage_daily is keyed by the API key too (0 for a request without one: a
-- JWT's), and rebuilt from the ledger in that grain.
ALTER TABLE usage_daily ADD COLUMN key_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_daily DROP CONSTRAINT usage_daily_pkey;
DELETE FROM usage_daily;
ALTER TABLE usage_daily ADD PRIMARY KEY (team_id, day, model, key_id);
INSERT INTO usage_daily (team_id, day, model, key_id, requests, prompt_tokens, completion_tokens, cost_microcredits)
SELECT team_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), model, COALESCE(key_id, 0), COUNT(*),
    SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_microcredits)
FROM usage_ledger WHERE status = 'settled'
GROUP BY 1, 2, 3, 4;

CREATE TABLE latency_hourly (
    team_id BIGINT NOT NULL REFERENCES teams (id),
    hour    TEXT NOT NULL CHECK (hour ~ '^\d{4}-\d{2}-\d{2} \d{2}$'),
    model   TEXT NOT NULL,
    key_id  BIGINT NOT NULL DEFAULT 0,
    requests NUMERIC NOT NULL DEFAULT 0,
    timed NUMERIC NOT NULL DEFAULT 0,
    timed_completion_tokens NUMERIC NOT NULL DEFAULT 0,
    generation_ms NUMERIC NOT NULL DEFAULT 0,
    ttft_b00 NUMERIC NOT NULL DEFAULT 0,
    ttft_b01 NUMERIC NOT NULL DEFAULT 0,
    ttft_b02 NUMERIC NOT NULL DEFAULT 0,
    ttft_b03 NUMERIC NOT NULL DEFAULT 0,
    ttft_b04 NUMERIC NOT NULL DEFAULT 0,
    ttft_b05 NUMERIC NOT NULL DEFAULT 0,
    ttft_b06 NUMERIC NOT NULL DEFAULT 0,
    ttft_b07 NUMERIC NOT NULL DEFAULT 0,
    ttft_b08 NUMERIC NOT NULL DEFAULT 0,
    ttft_b09 NUMERIC NOT NULL DEFAULT 0,
    ttft_b10 NUMERIC NOT NULL DEFAULT 0,
    ttft_b11 NUMERIC NOT NULL DEFAULT 0,
    ttft_b12 NUMERIC NOT NULL DEFAULT 0,
    ttft_b13 NUMERIC NOT NULL DEFAULT 0,
    ttft_b14 NUMERIC NOT NULL DEFAULT 0,
    ttft_b15 NUMERIC NOT NULL DEFAULT 0,
    queue_b00 NUMERIC NOT NULL DEFAULT 0,
    queue_b01 NUMERIC NOT NULL DEFAULT 0,
    queue_b02 NUMERIC NOT NULL DEFAULT 0,
    queue_b03 NUMERIC NOT NULL DEFAULT 0,
    queue_b04 NUMERIC NOT NULL DEFAULT 0,
    queue_b05 NUMERIC NOT NULL DEFAULT 0,
    queue_b06 NUMERIC NOT NULL DEFAULT 0,
    queue_b07 NUMERIC NOT NULL DEFAULT 0,
    queue_b08 NUMERIC NOT NULL DEFAULT 0,
    queue_b09 NUMERIC NOT NULL DEFAULT 0,
    queue_b10 NUMERIC NOT NULL DEFAULT 0,
    queue_b11 NUMERIC NOT NULL DEFAULT 0,
    queue_b12 NUMERIC NOT NULL DEFAULT 0,
    queue_b13 NUMERIC NOT NULL DEFAULT 0,
    queue_b14 NUMERIC NOT NULL DEFAULT 0,
    queue_b15 NUMERIC NOT NULL DEFAULT 0,
    PRIMARY KEY (team_id, hour, model, key_id)
);
-- The platform's pages read every team's hours of the last day.
CREATE INDEX latency_hourly_hour_idx ON latency_hourly (hour);

INSERT INTO latency_hourly (team_id, hour, model, key_id, requests)
SELECT team_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24'), model, COALESCE(key_id, 0), COUNT(*)
FROM usage_ledger WHERE status = 'settled'
GROUP BY 1, 2, 3, 4;

-- usage_daily_row moves both rollups by one ledger row's change.
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
        WHERE team_id = OLD.team_id AND day = to_char(OLD.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AND model = OLD.model
            AND key_id = COALESCE(OLD.key_id, 0);
        UPDATE latency_hourly SET
            requests = requests - 1,
            timed = timed - (OLD.ttft_ms IS NOT NULL)::int,
            timed_completion_tokens = timed_completion_tokens - CASE WHEN OLD.ttft_ms IS NOT NULL THEN OLD.completion_tokens ELSE 0 END,
            generation_ms = generation_ms - COALESCE(OLD.generation_ms, 0),
            ttft_b00 = ttft_b00 - COALESCE((OLD.ttft_ms < 10)::int, 0),
            ttft_b01 = ttft_b01 - COALESCE((OLD.ttft_ms >= 10 AND OLD.ttft_ms < 25)::int, 0),
            ttft_b02 = ttft_b02 - COALESCE((OLD.ttft_ms >= 25 AND OLD.ttft_ms < 50)::int, 0),
            ttft_b03 = ttft_b03 - COALESCE((OLD.ttft_ms >= 50 AND OLD.ttft_ms < 100)::int, 0),
            ttft_b04 = ttft_b04 - COALESCE((OLD.ttft_ms >= 100 AND OLD.ttft_ms < 200)::int, 0),
            ttft_b05 = ttft_b05 - COALESCE((OLD.ttft_ms >= 200 AND OLD.ttft_ms < 300)::int, 0),
            ttft_b06 = ttft_b06 - COALESCE((OLD.ttft_ms >= 300 AND OLD.ttft_ms < 500)::int, 0),
            ttft_b07 = ttft_b07 - COALESCE((OLD.ttft_ms >= 500 AND OLD.ttft_ms < 750)::int, 0),
            ttft_b08 = ttft_b08 - COALESCE((OLD.ttft_ms >= 750 AND OLD.ttft_ms < 1000)::int, 0),
            ttft_b09 = ttft_b09 - COALESCE((OLD.ttft_ms >= 1000 AND OLD.ttft_ms < 1500)::int, 0),
            ttft_b10 = ttft_b10 - COALESCE((OLD.ttft_ms >= 1500 AND OLD.ttft_ms < 2000)::int, 0),
            ttft_b11 = ttft_b11 - COALESCE((OLD.ttft_ms >= 2000 AND OLD.ttft_ms < 3000)::int, 0),
            ttft_b12 = ttft_b12 - COALESCE((OLD.ttft_ms >= 3000 AND OLD.ttft_ms < 5000)::int, 0),
            ttft_b13 = ttft_b13 - COALESCE((OLD.ttft_ms >= 5000 AND OLD.ttft_ms < 10000)::int, 0),
            ttft_b14 = ttft_b14 - COALESCE((OLD.ttft_ms >= 10000 AND OLD.ttft_ms < 30000)::int, 0),
            ttft_b15 = ttft_b15 - COALESCE((OLD.ttft_ms >= 30000)::int, 0),
            queue_b00 = queue_b00 - COALESCE((OLD.queue_ms < 10)::int, 0),
            queue_b01 = queue_b01 - COALESCE((OLD.queue_ms >= 10 AND OLD.queue_ms < 25)::int, 0),
            queue_b02 = queue_b02 - COALESCE((OLD.queue_ms >= 25 AND OLD.queue_ms < 50)::int, 0),
            queue_b03 = queue_b03 - COALESCE((OLD.queue_ms >= 50 AND OLD.queue_ms < 100)::int, 0),
            queue_b04 = queue_b04 - COALESCE((OLD.queue_ms >= 100 AND OLD.queue_ms < 200)::int, 0),
            queue_b05 = queue_b05 - COALESCE((OLD.queue_ms >= 200 AND OLD.queue_ms < 300)::int, 0),
            queue_b06 = queue_b06 - COALESCE((OLD.queue_ms >= 300 AND OLD.queue_ms < 500)::int, 0),
            queue_b07 = queue_b07 - COALESCE((OLD.queue_ms >= 500 AND OLD.queue_ms < 750)::int, 0),
            queue_b08 = queue_b08 - COALESCE((OLD.queue_ms >= 750 AND OLD.queue_ms < 1000)::int, 0),
            queue_b09 = queue_b09 - COALESCE((OLD.queue_ms >= 1000 AND OLD.queue_ms < 1500)::int, 0),
            queue_b10 = queue_b10 - COALESCE((OLD.queue_ms >= 1500 AND OLD.queue_ms < 2000)::int, 0),
            queue_b11 = queue_b11 - COALESCE((OLD.queue_ms >= 2000 AND OLD.queue_ms < 3000)::int, 0),
            queue_b12 = queue_b12 - COALESCE((OLD.queue_ms >= 3000 AND OLD.queue_ms < 5000)::int, 0),
            queue_b13 = queue_b13 - COALESCE((OLD.queue_ms >= 5000 AND OLD.queue_ms < 10000)::int, 0),
            queue_b14 = queue_b14 - COALESCE((OLD.queue_ms >= 10000 AND OLD.queue_ms < 30000)::int, 0),
            queue_b15 = queue_b15 - COALESCE((OLD.queue_ms >= 30000)::int, 0)
        WHERE team_id = OLD.team_id AND hour = to_char(OLD.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24') AND model = OLD.model
            AND key_id = COALESCE(OLD.key_id, 0);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.status = 'settled' THEN
        INSERT INTO usage_daily AS d (team_id, day, model, key_id, requests, prompt_tokens, completion_tokens, cost_microcredits)
        VALUES (NEW.team_id, to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), NEW.model, COALESCE(NEW.key_id, 0), 1,
            NEW.prompt_tokens, NEW.completion_tokens, NEW.cost_microcredits)
        ON CONFLICT (team_id, day, model, key_id) DO UPDATE SET requests = d.requests + 1,
            prompt_tokens = d.prompt_tokens + EXCLUDED.prompt_tokens,
            completion_tokens = d.completion_tokens + EXCLUDED.completion_tokens,
            cost_microcredits = d.cost_microcredits + EXCLUDED.cost_microcredits;
        INSERT INTO latency_hourly AS d (team_id, hour, model, key_id, requests, timed, timed_completion_tokens, generation_ms, ttft_b00, ttft_b01, ttft_b02, ttft_b03, ttft_b04, ttft_b05, ttft_b06, ttft_b07, ttft_b08, ttft_b09, ttft_b10, ttft_b11, ttft_b12, ttft_b13, ttft_b14, ttft_b15, queue_b00, queue_b01, queue_b02, queue_b03, queue_b04, queue_b05, queue_b06, queue_b07, queue_b08, queue_b09, queue_b10, queue_b11, queue_b12, queue_b13, queue_b14, queue_b15)
        VALUES (NEW.team_id, to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24'), NEW.model, COALESCE(NEW.key_id, 0),
            1,
            (NEW.ttft_ms IS NOT NULL)::int,
            CASE WHEN NEW.ttft_ms IS NOT NULL THEN NEW.completion_tokens ELSE 0 END,
            COALESCE(NEW.generation_ms, 0),
            COALESCE((NEW.ttft_ms < 10)::int, 0),
            COALESCE((NEW.ttft_ms >= 10 AND NEW.ttft_ms < 25)::int, 0),
            COALESCE((NEW.ttft_ms >= 25 AND NEW.ttft_ms < 50)::int, 0),
            COALESCE((NEW.ttft_ms >= 50 AND NEW.ttft_ms < 100)::int, 0),
            COALESCE((NEW.ttft_ms >= 100 AND NEW.ttft_ms < 200)::int, 0),
            COALESCE((NEW.ttft_ms >= 200 AND NEW.ttft_ms < 300)::int, 0),
            COALESCE((NEW.ttft_ms >= 300 AND NEW.ttft_ms < 500)::int, 0),
            COALESCE((NEW.ttft_ms >= 500 AND NEW.ttft_ms < 750)::int, 0),
            COALESCE((NEW.ttft_ms >= 750 AND NEW.ttft_ms < 1000)::int, 0),
            COALESCE((NEW.ttft_ms >= 1000 AND NEW.ttft_ms < 1500)::int, 0),
            COALESCE((NEW.ttft_ms >= 1500 AND NEW.ttft_ms < 2000)::int, 0),
            COALESCE((NEW.ttft_ms >= 2000 AND NEW.ttft_ms < 3000)::int, 0),
            COALESCE((NEW.ttft_ms >= 3000 AND NEW.ttft_ms < 5000)::int, 0),
            COALESCE((NEW.ttft_ms >= 5000 AND NEW.ttft_ms < 10000)::int, 0),
            COALESCE((NEW.ttft_ms >= 10000 AND NEW.ttft_ms < 30000)::int, 0),
            COALESCE((NEW.ttft_ms >= 30000)::int, 0),
            COALESCE((NEW.queue_ms < 10)::int, 0),
            COALESCE((NEW.queue_ms >= 10 AND NEW.queue_ms < 25)::int, 0),
            COALESCE((NEW.queue_ms >= 25 AND NEW.queue_ms < 50)::int, 0),
            COALESCE((NEW.queue_ms >= 50 AND NEW.queue_ms < 100)::int, 0),
            COALESCE((NEW.queue_ms >= 100 AND NEW.queue_ms < 200)::int, 0),
            COALESCE((NEW.queue_ms >= 200 AND NEW.queue_ms < 300)::int, 0),
            COALESCE((NEW.queue_ms >= 300 AND NEW.queue_ms < 500)::int, 0),
            COALESCE((NEW.queue_ms >= 500 AND NEW.queue_ms < 750)::int, 0),
            COALESCE((NEW.queue_ms >= 750 AND NEW.queue_ms < 1000)::int, 0),
            COALESCE((NEW.queue_ms >= 1000 AND NEW.queue_ms < 1500)::int, 0),
            COALESCE((NEW.queue_ms >= 1500 AND NEW.queue_ms < 2000)::int, 0),
            COALESCE((NEW.queue_ms >= 2000 AND NEW.queue_ms < 3000)::int, 0),
            COALESCE((NEW.queue_ms >= 3000 AND NEW.queue_ms < 5000)::int, 0),
            COALESCE((NEW.queue_ms >= 5000 AND NEW.queue_ms < 10000)::int, 0),
            COALESCE((NEW.queue_ms >= 10000 AND NEW.queue_ms < 30000)::int, 0),
            COALESCE((NEW.queue_ms >= 30000)::int, 0))
        ON CONFLICT (team_id, hour, model, key_id) DO UPDATE SET
            requests = d.requests + EXCLUDED.requests,
            timed = d.timed + EXCLUDED.timed,
            timed_completion_tokens = d.timed_completion_tokens + EXCLUDED.timed_completion_tokens,
            generation_ms = d.generation_ms + EXCLUDED.generation_ms,
            ttft_b00 = d.ttft_b00 + EXCLUDED.ttft_b00,
            ttft_b01 = d.ttft_b01 + EXCLUDED.ttft_b01,
            ttft_b02 = d.ttft_b02 + EXCLUDED.ttft_b02,
            ttft_b03 = d.ttft_b03 + EXCLUDED.ttft_b03,
            ttft_b04 = d.ttft_b04 + EXCLUDED.ttft_b04,
            ttft_b05 = d.ttft_b05 + EXCLUDED.ttft_b05,
            ttft_b06 = d.ttft_b06 + EXCLUDED.ttft_b06,
            ttft_b07 = d.ttft_b07 + EXCLUDED.ttft_b07,
            ttft_b08 = d.ttft_b08 + EXCLUDED.ttft_b08,
            ttft_b09 = d.ttft_b09 + EXCLUDED.ttft_b09,
            ttft_b10 = d.ttft_b10 + EXCLUDED.ttft_b10,
            ttft_b11 = d.ttft_b11 + EXCLUDED.ttft_b11,
            ttft_b12 = d.ttft_b12 + EXCLUDED.ttft_b12,
            ttft_b13 = d.ttft_b13 + EXCLUDED.ttft_b13,
            ttft_b14 = d.ttft_b14 + EXCLUDED.ttft_b14,
            ttft_b15 = d.ttft_b15 + EXCLUDED.ttft_b15,
            queue_b00 = d.queue_b00 + EXCLUDED.queue_b00,
            queue_b01 = d.queue_b01 + EXCLUDED.queue_b01,
            queue_b02 = d.queue_b02 + EXCLUDED.queue_b02,
            queue_b03 = d.queue_b03 + EXCLUDED.queue_b03,
            queue_b04 = d.queue_b04 + EXCLUDED.queue_b04,
            queue_b05 = d.queue_b05 + EXCLUDED.queue_b05,
            queue_b06 = d.queue_b06 + EXCLUDED.queue_b06,
            queue_b07 = d.queue_b07 + EXCLUDED.queue_b07,
            queue_b08 = d.queue_b08 + EXCLUDED.queue_b08,
            queue_b09 = d.queue_b09 + EXCLUDED.queue_b09,
            queue_b10 = d.queue_b10 + EXCLUDED.queue_b10,
            queue_b11 = d.queue_b11 + EXCLUDED.queue_b11,
            queue_b12 = d.queue_b12 + EXCLUDED.queue_b12,
            queue_b13 = d.queue_b13 + EXCLUDED.queue_b13,
            queue_b14 = d.queue_b14 + EXCLUDED.queue_b14,
            queue_b15 = d.queue_b15 + EXCLUDED.queue_b15;
    END IF;
    RETURN NULL;
END
$$;

-- usage_daily_insert folds one statement's inserted settled rows into both
-- rollups.
CREATE OR REPLACE FUNCTION usage_daily_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_daily AS d (team_id, day, model, key_id, requests, prompt_tokens, completion_tokens, cost_microcredits)
    SELECT team_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), model, COALESCE(key_id, 0), COUNT(*),
        SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_microcredits)
    FROM inserted WHERE status = 'settled'
    GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (team_id, day, model, key_id) DO UPDATE SET requests = d.requests + EXCLUDED.requests,
        prompt_tokens = d.prompt_tokens + EXCLUDED.prompt_tokens,
        completion_tokens = d.completion_tokens + EXCLUDED.completion_tokens,
        cost_microcredits = d.cost_microcredits + EXCLUDED.cost_microcredits;
    INSERT INTO latency_hourly AS d (team_id, hour, model, key_id, requests, timed, timed_completion_tokens, generation_ms, ttft_b00, ttft_b01, ttft_b02, ttft_b03, ttft_b04, ttft_b05, ttft_b06, ttft_b07, ttft_b08, ttft_b09, ttft_b10, ttft_b11, ttft_b12, ttft_b13, ttft_b14, ttft_b15, queue_b00, queue_b01, queue_b02, queue_b03, queue_b04, queue_b05, queue_b06, queue_b07, queue_b08, queue_b09, queue_b10, queue_b11, queue_b12, queue_b13, queue_b14, queue_b15)
    SELECT i.team_id, to_char(i.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24'), i.model, COALESCE(i.key_id, 0),
        SUM(1),
        SUM((i.ttft_ms IS NOT NULL)::int),
        SUM(CASE WHEN i.ttft_ms IS NOT NULL THEN i.completion_tokens ELSE 0 END),
        SUM(COALESCE(i.generation_ms, 0)),
        SUM(COALESCE((i.ttft_ms < 10)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 10 AND i.ttft_ms < 25)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 25 AND i.ttft_ms < 50)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 50 AND i.ttft_ms < 100)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 100 AND i.ttft_ms < 200)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 200 AND i.ttft_ms < 300)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 300 AND i.ttft_ms < 500)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 500 AND i.ttft_ms < 750)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 750 AND i.ttft_ms < 1000)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 1000 AND i.ttft_ms < 1500)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 1500 AND i.ttft_ms < 2000)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 2000 AND i.ttft_ms < 3000)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 3000 AND i.ttft_ms < 5000)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 5000 AND i.ttft_ms < 10000)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 10000 AND i.ttft_ms < 30000)::int, 0)),
        SUM(COALESCE((i.ttft_ms >= 30000)::int, 0)),
        SUM(COALESCE((i.queue_ms < 10)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 10 AND i.queue_ms < 25)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 25 AND i.queue_ms < 50)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 50 AND i.queue_ms < 100)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 100 AND i.queue_ms < 200)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 200 AND i.queue_ms < 300)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 300 AND i.queue_ms < 500)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 500 AND i.queue_ms < 750)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 750 AND i.queue_ms < 1000)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 1000 AND i.queue_ms < 1500)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 1500 AND i.queue_ms < 2000)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 2000 AND i.queue_ms < 3000)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 3000 AND i.queue_ms < 5000)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 5000 AND i.queue_ms < 10000)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 10000 AND i.queue_ms < 30000)::int, 0)),
        SUM(COALESCE((i.queue_ms >= 30000)::int, 0))
    FROM inserted i WHERE i.status = 'settled'
    GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (team_id, hour, model, key_id) DO UPDATE SET
        requests = d.requests + EXCLUDED.requests,
            timed = d.timed + EXCLUDED.timed,
            timed_completion_tokens = d.timed_completion_tokens + EXCLUDED.timed_completion_tokens,
            generation_ms = d.generation_ms + EXCLUDED.generation_ms,
            ttft_b00 = d.ttft_b00 + EXCLUDED.ttft_b00,
            ttft_b01 = d.ttft_b01 + EXCLUDED.ttft_b01,
            ttft_b02 = d.ttft_b02 + EXCLUDED.ttft_b02,
            ttft_b03 = d.ttft_b03 + EXCLUDED.ttft_b03,
            ttft_b04 = d.ttft_b04 + EXCLUDED.ttft_b04,
            ttft_b05 = d.ttft_b05 + EXCLUDED.ttft_b05,
            ttft_b06 = d.ttft_b06 + EXCLUDED.ttft_b06,
            ttft_b07 = d.ttft_b07 + EXCLUDED.ttft_b07,
            ttft_b08 = d.ttft_b08 + EXCLUDED.ttft_b08,
            ttft_b09 = d.ttft_b09 + EXCLUDED.ttft_b09,
            ttft_b10 = d.ttft_b10 + EXCLUDED.ttft_b10,
            ttft_b11 = d.ttft_b11 + EXCLUDED.ttft_b11,
            ttft_b12 = d.ttft_b12 + EXCLUDED.ttft_b12,
            ttft_b13 = d.ttft_b13 + EXCLUDED.ttft_b13,
            ttft_b14 = d.ttft_b14 + EXCLUDED.ttft_b14,
            ttft_b15 = d.ttft_b15 + EXCLUDED.ttft_b15,
            queue_b00 = d.queue_b00 + EXCLUDED.queue_b00,
            queue_b01 = d.queue_b01 + EXCLUDED.queue_b01,
            queue_b02 = d.queue_b02 + EXCLUDED.queue_b02,
            queue_b03 = d.queue_b03 + EXCLUDED.queue_b03,
            queue_b04 = d.queue_b04 + EXCLUDED.queue_b04,
            queue_b05 = d.queue_b05 + EXCLUDED.queue_b05,
            queue_b06 = d.queue_b06 + EXCLUDED.queue_b06,
            queue_b07 = d.queue_b07 + EXCLUDED.queue_b07,
            queue_b08 = d.queue_b08 + EXCLUDED.queue_b08,
            queue_b09 = d.queue_b09 + EXCLUDED.queue_b09,
            queue_b10 = d.queue_b10 + EXCLUDED.queue_b10,
            queue_b11 = d.queue_b11 + EXCLUDED.queue_b11,
            queue_b12 = d.queue_b12 + EXCLUDED.queue_b12,
            queue_b13 = d.queue_b13 + EXCLUDED.queue_b13,
            queue_b14 = d.queue_b14 + EXCLUDED.queue_b14,
            queue_b15 = d.queue_b15 + EXCLUDED.queue_b15;
    RETURN NULL;
END
$$;
