-- 0009_usage_by_key_latency: usage per API key and the latency the teams
-- experienced (see the PostgreSQL file for the columns and the buckets).
-- SQLite cannot change a table's key, so usage_daily is rebuilt with key_id,
-- and the four row triggers of 0006 are recreated to move both rollups.
ALTER TABLE usage_ledger ADD COLUMN ttft_ms INTEGER CHECK (ttft_ms >= 0);
ALTER TABLE usage_ledger ADD COLUMN generation_ms INTEGER CHECK (generation_ms >= 0);
ALTER TABLE usage_ledger ADD COLUMN queue_ms INTEGER CHECK (queue_ms >= 0);

DROP TRIGGER usage_daily_remove;
DROP TRIGGER usage_daily_delete;
DROP TRIGGER usage_daily_add_update;
DROP TRIGGER usage_daily_add_insert;

-- usage_daily is keyed by the API key too (0 for a request without one),
-- rebuilt from the ledger in that grain (SQLite cannot change a key).
CREATE TABLE usage_daily_by_key (
    team_id           BIGINT NOT NULL REFERENCES teams (id),
    day               TEXT NOT NULL,
    model             TEXT NOT NULL,
    key_id            BIGINT NOT NULL DEFAULT 0,
    requests          INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_microcredits INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (team_id, day, model, key_id)
);
INSERT INTO usage_daily_by_key (team_id, day, model, key_id, requests, prompt_tokens, completion_tokens, cost_microcredits)
SELECT team_id, substr(created_at, 1, 10), model, COALESCE(key_id, 0), COUNT(*),
    TOTAL(prompt_tokens), TOTAL(completion_tokens), TOTAL(cost_microcredits)
FROM usage_ledger WHERE status = 'settled'
GROUP BY 1, 2, 3, 4;
DROP TABLE usage_daily;
ALTER TABLE usage_daily_by_key RENAME TO usage_daily;

CREATE TABLE latency_hourly (
    team_id BIGINT NOT NULL REFERENCES teams (id),
    hour    TEXT NOT NULL,
    model   TEXT NOT NULL,
    key_id  BIGINT NOT NULL DEFAULT 0,
    requests INTEGER NOT NULL DEFAULT 0,
    timed INTEGER NOT NULL DEFAULT 0,
    timed_completion_tokens INTEGER NOT NULL DEFAULT 0,
    generation_ms INTEGER NOT NULL DEFAULT 0,
    ttft_b00 INTEGER NOT NULL DEFAULT 0,
    ttft_b01 INTEGER NOT NULL DEFAULT 0,
    ttft_b02 INTEGER NOT NULL DEFAULT 0,
    ttft_b03 INTEGER NOT NULL DEFAULT 0,
    ttft_b04 INTEGER NOT NULL DEFAULT 0,
    ttft_b05 INTEGER NOT NULL DEFAULT 0,
    ttft_b06 INTEGER NOT NULL DEFAULT 0,
    ttft_b07 INTEGER NOT NULL DEFAULT 0,
    ttft_b08 INTEGER NOT NULL DEFAULT 0,
    ttft_b09 INTEGER NOT NULL DEFAULT 0,
    ttft_b10 INTEGER NOT NULL DEFAULT 0,
    ttft_b11 INTEGER NOT NULL DEFAULT 0,
    ttft_b12 INTEGER NOT NULL DEFAULT 0,
    ttft_b13 INTEGER NOT NULL DEFAULT 0,
    ttft_b14 INTEGER NOT NULL DEFAULT 0,
    ttft_b15 INTEGER NOT NULL DEFAULT 0,
    queue_b00 INTEGER NOT NULL DEFAULT 0,
    queue_b01 INTEGER NOT NULL DEFAULT 0,
    queue_b02 INTEGER NOT NULL DEFAULT 0,
    queue_b03 INTEGER NOT NULL DEFAULT 0,
    queue_b04 INTEGER NOT NULL DEFAULT 0,
    queue_b05 INTEGER NOT NULL DEFAULT 0,
    queue_b06 INTEGER NOT NULL DEFAULT 0,
    queue_b07 INTEGER NOT NULL DEFAULT 0,
    queue_b08 INTEGER NOT NULL DEFAULT 0,
    queue_b09 INTEGER NOT NULL DEFAULT 0,
    queue_b10 INTEGER NOT NULL DEFAULT 0,
    queue_b11 INTEGER NOT NULL DEFAULT 0,
    queue_b12 INTEGER NOT NULL DEFAULT 0,
    queue_b13 INTEGER NOT NULL DEFAULT 0,
    queue_b14 INTEGER NOT NULL DEFAULT 0,
    queue_b15 INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (team_id, hour, model, key_id)
);
CREATE INDEX latency_hourly_hour_idx ON latency_hourly (hour);

INSERT INTO latency_hourly (team_id, hour, model, key_id, requests)
SELECT team_id, replace(substr(created_at, 1, 13), 'T', ' '), model, COALESCE(key_id, 0), COUNT(*)
FROM usage_ledger WHERE status = 'settled'
GROUP BY 1, 2, 3, 4;

CREATE TRIGGER usage_daily_remove AFTER UPDATE ON usage_ledger
WHEN OLD.status = 'settled'
BEGIN
    UPDATE usage_daily SET requests = requests - 1,
        prompt_tokens = prompt_tokens - OLD.prompt_tokens,
        completion_tokens = completion_tokens - OLD.completion_tokens,
        cost_microcredits = cost_microcredits - OLD.cost_microcredits
    WHERE team_id = OLD.team_id AND day = substr(OLD.created_at, 1, 10) AND model = OLD.model AND key_id = COALESCE(OLD.key_id, 0);
    UPDATE latency_hourly SET
        requests = requests - 1,
        timed = timed - (OLD.ttft_ms IS NOT NULL),
        timed_completion_tokens = timed_completion_tokens - CASE WHEN OLD.ttft_ms IS NOT NULL THEN OLD.completion_tokens ELSE 0 END,
        generation_ms = generation_ms - COALESCE(OLD.generation_ms, 0),
        ttft_b00 = ttft_b00 - COALESCE((OLD.ttft_ms < 10), 0),
        ttft_b01 = ttft_b01 - COALESCE((OLD.ttft_ms >= 10 AND OLD.ttft_ms < 25), 0),
        ttft_b02 = ttft_b02 - COALESCE((OLD.ttft_ms >= 25 AND OLD.ttft_ms < 50), 0),
        ttft_b03 = ttft_b03 - COALESCE((OLD.ttft_ms >= 50 AND OLD.ttft_ms < 100), 0),
        ttft_b04 = ttft_b04 - COALESCE((OLD.ttft_ms >= 100 AND OLD.ttft_ms < 200), 0),
        ttft_b05 = ttft_b05 - COALESCE((OLD.ttft_ms >= 200 AND OLD.ttft_ms < 300), 0),
        ttft_b06 = ttft_b06 - COALESCE((OLD.ttft_ms >= 300 AND OLD.ttft_ms < 500), 0),
        ttft_b07 = ttft_b07 - COALESCE((OLD.ttft_ms >= 500 AND OLD.ttft_ms < 750), 0),
        ttft_b08 = ttft_b08 - COALESCE((OLD.ttft_ms >= 750 AND OLD.ttft_ms < 1000), 0),
        ttft_b09 = ttft_b09 - COALESCE((OLD.ttft_ms >= 1000 AND OLD.ttft_ms < 1500), 0),
        ttft_b10 = ttft_b10 - COALESCE((OLD.ttft_ms >= 1500 AND OLD.ttft_ms < 2000), 0),
        ttft_b11 = ttft_b11 - COALESCE((OLD.ttft_ms >= 2000 AND OLD.ttft_ms < 3000), 0),
        ttft_b12 = ttft_b12 - COALESCE((OLD.ttft_ms >= 3000 AND OLD.ttft_ms < 5000), 0),
        ttft_b13 = ttft_b13 - COALESCE((OLD.ttft_ms >= 5000 AND OLD.ttft_ms < 10000), 0),
        ttft_b14 = ttft_b14 - COALESCE((OLD.ttft_ms >= 10000 AND OLD.ttft_ms < 30000), 0),
        ttft_b15 = ttft_b15 - COALESCE((OLD.ttft_ms >= 30000), 0),
        queue_b00 = queue_b00 - COALESCE((OLD.queue_ms < 10), 0),
        queue_b01 = queue_b01 - COALESCE((OLD.queue_ms >= 10 AND OLD.queue_ms < 25), 0),
        queue_b02 = queue_b02 - COALESCE((OLD.queue_ms >= 25 AND OLD.queue_ms < 50), 0),
        queue_b03 = queue_b03 - COALESCE((OLD.queue_ms >= 50 AND OLD.queue_ms < 100), 0),
        queue_b04 = queue_b04 - COALESCE((OLD.queue_ms >= 100 AND OLD.queue_ms < 200), 0),
        queue_b05 = queue_b05 - COALESCE((OLD.queue_ms >= 200 AND OLD.queue_ms < 300), 0),
        queue_b06 = queue_b06 - COALESCE((OLD.queue_ms >= 300 AND OLD.queue_ms < 500), 0),
        queue_b07 = queue_b07 - COALESCE((OLD.queue_ms >= 500 AND OLD.queue_ms < 750), 0),
        queue_b08 = queue_b08 - COALESCE((OLD.queue_ms >= 750 AND OLD.queue_ms < 1000), 0),
        queue_b09 = queue_b09 - COALESCE((OLD.queue_ms >= 1000 AND OLD.queue_ms < 1500), 0),
        queue_b10 = queue_b10 - COALESCE((OLD.queue_ms >= 1500 AND OLD.queue_ms < 2000), 0),
        queue_b11 = queue_b11 - COALESCE((OLD.queue_ms >= 2000 AND OLD.queue_ms < 3000), 0),
        queue_b12 = queue_b12 - COALESCE((OLD.queue_ms >= 3000 AND OLD.queue_ms < 5000), 0),
        queue_b13 = queue_b13 - COALESCE((OLD.queue_ms >= 5000 AND OLD.queue_ms < 10000), 0),
        queue_b14 = queue_b14 - COALESCE((OLD.queue_ms >= 10000 AND OLD.queue_ms < 30000), 0),
        queue_b15 = queue_b15 - COALESCE((OLD.queue_ms >= 30000), 0)
    WHERE team_id = OLD.team_id AND hour = replace(substr(OLD.created_at, 1, 13), 'T', ' ') AND model = OLD.model AND key_id = COALESCE(OLD.key_id, 0);
END;

CREATE TRIGGER usage_daily_delete AFTER DELETE ON usage_ledger
WHEN OLD.status = 'settled'
BEGIN
    UPDATE usage_daily SET requests = requests - 1,
        prompt_tokens = prompt_tokens - OLD.prompt_tokens,
        completion_tokens = completion_tokens - OLD.completion_tokens,
        cost_microcredits = cost_microcredits - OLD.cost_microcredits
    WHERE team_id = OLD.team_id AND day = substr(OLD.created_at, 1, 10) AND model = OLD.model AND key_id = COALESCE(OLD.key_id, 0);
    UPDATE latency_hourly SET
        requests = requests - 1,
        timed = timed - (OLD.ttft_ms IS NOT NULL),
        timed_completion_tokens = timed_completion_tokens - CASE WHEN OLD.ttft_ms IS NOT NULL THEN OLD.completion_tokens ELSE 0 END,
        generation_ms = generation_ms - COALESCE(OLD.generation_ms, 0),
        ttft_b00 = ttft_b00 - COALESCE((OLD.ttft_ms < 10), 0),
        ttft_b01 = ttft_b01 - COALESCE((OLD.ttft_ms >= 10 AND OLD.ttft_ms < 25), 0),
        ttft_b02 = ttft_b02 - COALESCE((OLD.ttft_ms >= 25 AND OLD.ttft_ms < 50), 0),
        ttft_b03 = ttft_b03 - COALESCE((OLD.ttft_ms >= 50 AND OLD.ttft_ms < 100), 0),
        ttft_b04 = ttft_b04 - COALESCE((OLD.ttft_ms >= 100 AND OLD.ttft_ms < 200), 0),
        ttft_b05 = ttft_b05 - COALESCE((OLD.ttft_ms >= 200 AND OLD.ttft_ms < 300), 0),
        ttft_b06 = ttft_b06 - COALESCE((OLD.ttft_ms >= 300 AND OLD.ttft_ms < 500), 0),
        ttft_b07 = ttft_b07 - COALESCE((OLD.ttft_ms >= 500 AND OLD.ttft_ms < 750), 0),
        ttft_b08 = ttft_b08 - COALESCE((OLD.ttft_ms >= 750 AND OLD.ttft_ms < 1000), 0),
        ttft_b09 = ttft_b09 - COALESCE((OLD.ttft_ms >= 1000 AND OLD.ttft_ms < 1500), 0),
        ttft_b10 = ttft_b10 - COALESCE((OLD.ttft_ms >= 1500 AND OLD.ttft_ms < 2000), 0),
        ttft_b11 = ttft_b11 - COALESCE((OLD.ttft_ms >= 2000 AND OLD.ttft_ms < 3000), 0),
        ttft_b12 = ttft_b12 - COALESCE((OLD.ttft_ms >= 3000 AND OLD.ttft_ms < 5000), 0),
        ttft_b13 = ttft_b13 - COALESCE((OLD.ttft_ms >= 5000 AND OLD.ttft_ms < 10000), 0),
        ttft_b14 = ttft_b14 - COALESCE((OLD.ttft_ms >= 10000 AND OLD.ttft_ms < 30000), 0),
        ttft_b15 = ttft_b15 - COALESCE((OLD.ttft_ms >= 30000), 0),
        queue_b00 = queue_b00 - COALESCE((OLD.queue_ms < 10), 0),
        queue_b01 = queue_b01 - COALESCE((OLD.queue_ms >= 10 AND OLD.queue_ms < 25), 0),
        queue_b02 = queue_b02 - COALESCE((OLD.queue_ms >= 25 AND OLD.queue_ms < 50), 0),
        queue_b03 = queue_b03 - COALESCE((OLD.queue_ms >= 50 AND OLD.queue_ms < 100), 0),
        queue_b04 = queue_b04 - COALESCE((OLD.queue_ms >= 100 AND OLD.queue_ms < 200), 0),
        queue_b05 = queue_b05 - COALESCE((OLD.queue_ms >= 200 AND OLD.queue_ms < 300), 0),
        queue_b06 = queue_b06 - COALESCE((OLD.queue_ms >= 300 AND OLD.queue_ms < 500), 0),
        queue_b07 = queue_b07 - COALESCE((OLD.queue_ms >= 500 AND OLD.queue_ms < 750), 0),
        queue_b08 = queue_b08 - COALESCE((OLD.queue_ms >= 750 AND OLD.queue_ms < 1000), 0),
        queue_b09 = queue_b09 - COALESCE((OLD.queue_ms >= 1000 AND OLD.queue_ms < 1500), 0),
        queue_b10 = queue_b10 - COALESCE((OLD.queue_ms >= 1500 AND OLD.queue_ms < 2000), 0),
        queue_b11 = queue_b11 - COALESCE((OLD.queue_ms >= 2000 AND OLD.queue_ms < 3000), 0),
        queue_b12 = queue_b12 - COALESCE((OLD.queue_ms >= 3000 AND OLD.queue_ms < 5000), 0),
        queue_b13 = queue_b13 - COALESCE((OLD.queue_ms >= 5000 AND OLD.queue_ms < 10000), 0),
        queue_b14 = queue_b14 - COALESCE((OLD.queue_ms >= 10000 AND OLD.queue_ms < 30000), 0),
        queue_b15 = queue_b15 - COALESCE((OLD.queue_ms >= 30000), 0)
    WHERE team_id = OLD.team_id AND hour = replace(substr(OLD.created_at, 1, 13), 'T', ' ') AND model = OLD.model AND key_id = COALESCE(OLD.key_id, 0);
END;

CREATE TRIGGER usage_daily_add_update AFTER UPDATE ON usage_ledger
WHEN NEW.status = 'settled'
BEGIN
    INSERT OR IGNORE INTO usage_daily (team_id, day, model, key_id) VALUES (NEW.team_id, substr(NEW.created_at, 1, 10), NEW.model, COALESCE(NEW.key_id, 0));
    UPDATE usage_daily SET requests = requests + 1,
        prompt_tokens = prompt_tokens + NEW.prompt_tokens,
        completion_tokens = completion_tokens + NEW.completion_tokens,
        cost_microcredits = cost_microcredits + NEW.cost_microcredits
    WHERE team_id = NEW.team_id AND day = substr(NEW.created_at, 1, 10) AND model = NEW.model AND key_id = COALESCE(NEW.key_id, 0);
    INSERT OR IGNORE INTO latency_hourly (team_id, hour, model, key_id) VALUES (NEW.team_id, replace(substr(NEW.created_at, 1, 13), 'T', ' '), NEW.model, COALESCE(NEW.key_id, 0));
    UPDATE latency_hourly SET
        requests = requests + 1,
        timed = timed + (NEW.ttft_ms IS NOT NULL),
        timed_completion_tokens = timed_completion_tokens + CASE WHEN NEW.ttft_ms IS NOT NULL THEN NEW.completion_tokens ELSE 0 END,
        generation_ms = generation_ms + COALESCE(NEW.generation_ms, 0),
        ttft_b00 = ttft_b00 + COALESCE((NEW.ttft_ms < 10), 0),
        ttft_b01 = ttft_b01 + COALESCE((NEW.ttft_ms >= 10 AND NEW.ttft_ms < 25), 0),
        ttft_b02 = ttft_b02 + COALESCE((NEW.ttft_ms >= 25 AND NEW.ttft_ms < 50), 0),
        ttft_b03 = ttft_b03 + COALESCE((NEW.ttft_ms >= 50 AND NEW.ttft_ms < 100), 0),
        ttft_b04 = ttft_b04 + COALESCE((NEW.ttft_ms >= 100 AND NEW.ttft_ms < 200), 0),
        ttft_b05 = ttft_b05 + COALESCE((NEW.ttft_ms >= 200 AND NEW.ttft_ms < 300), 0),
        ttft_b06 = ttft_b06 + COALESCE((NEW.ttft_ms >= 300 AND NEW.ttft_ms < 500), 0),
        ttft_b07 = ttft_b07 + COALESCE((NEW.ttft_ms >= 500 AND NEW.ttft_ms < 750), 0),
        ttft_b08 = ttft_b08 + COALESCE((NEW.ttft_ms >= 750 AND NEW.ttft_ms < 1000), 0),
        ttft_b09 = ttft_b09 + COALESCE((NEW.ttft_ms >= 1000 AND NEW.ttft_ms < 1500), 0),
        ttft_b10 = ttft_b10 + COALESCE((NEW.ttft_ms >= 1500 AND NEW.ttft_ms < 2000), 0),
        ttft_b11 = ttft_b11 + COALESCE((NEW.ttft_ms >= 2000 AND NEW.ttft_ms < 3000), 0),
        ttft_b12 = ttft_b12 + COALESCE((NEW.ttft_ms >= 3000 AND NEW.ttft_ms < 5000), 0),
        ttft_b13 = ttft_b13 + COALESCE((NEW.ttft_ms >= 5000 AND NEW.ttft_ms < 10000), 0),
        ttft_b14 = ttft_b14 + COALESCE((NEW.ttft_ms >= 10000 AND NEW.ttft_ms < 30000), 0),
        ttft_b15 = ttft_b15 + COALESCE((NEW.ttft_ms >= 30000), 0),
        queue_b00 = queue_b00 + COALESCE((NEW.queue_ms < 10), 0),
        queue_b01 = queue_b01 + COALESCE((NEW.queue_ms >= 10 AND NEW.queue_ms < 25), 0),
        queue_b02 = queue_b02 + COALESCE((NEW.queue_ms >= 25 AND NEW.queue_ms < 50), 0),
        queue_b03 = queue_b03 + COALESCE((NEW.queue_ms >= 50 AND NEW.queue_ms < 100), 0),
        queue_b04 = queue_b04 + COALESCE((NEW.queue_ms >= 100 AND NEW.queue_ms < 200), 0),
        queue_b05 = queue_b05 + COALESCE((NEW.queue_ms >= 200 AND NEW.queue_ms < 300), 0),
        queue_b06 = queue_b06 + COALESCE((NEW.queue_ms >= 300 AND NEW.queue_ms < 500), 0),
        queue_b07 = queue_b07 + COALESCE((NEW.queue_ms >= 500 AND NEW.queue_ms < 750), 0),
        queue_b08 = queue_b08 + COALESCE((NEW.queue_ms >= 750 AND NEW.queue_ms < 1000), 0),
        queue_b09 = queue_b09 + COALESCE((NEW.queue_ms >= 1000 AND NEW.queue_ms < 1500), 0),
        queue_b10 = queue_b10 + COALESCE((NEW.queue_ms >= 1500 AND NEW.queue_ms < 2000), 0),
        queue_b11 = queue_b11 + COALESCE((NEW.queue_ms >= 2000 AND NEW.queue_ms < 3000), 0),
        queue_b12 = queue_b12 + COALESCE((NEW.queue_ms >= 3000 AND NEW.queue_ms < 5000), 0),
        queue_b13 = queue_b13 + COALESCE((NEW.queue_ms >= 5000 AND NEW.queue_ms < 10000), 0),
        queue_b14 = queue_b14 + COALESCE((NEW.queue_ms >= 10000 AND NEW.queue_ms < 30000), 0),
        queue_b15 = queue_b15 + COALESCE((NEW.queue_ms >= 30000), 0)
    WHERE team_id = NEW.team_id AND hour = replace(substr(NEW.created_at, 1, 13), 'T', ' ') AND model = NEW.model AND key_id = COALESCE(NEW.key_id, 0);
END;

CREATE TRIGGER usage_daily_add_insert AFTER INSERT ON usage_ledger
WHEN NEW.status = 'settled'
BEGIN
    INSERT OR IGNORE INTO usage_daily (team_id, day, model, key_id) VALUES (NEW.team_id, substr(NEW.created_at, 1, 10), NEW.model, COALESCE(NEW.key_id, 0));
    UPDATE usage_daily SET requests = requests + 1,
        prompt_tokens = prompt_tokens + NEW.prompt_tokens,
        completion_tokens = completion_tokens + NEW.completion_tokens,
        cost_microcredits = cost_microcredits + NEW.cost_microcredits
    WHERE team_id = NEW.team_id AND day = substr(NEW.created_at, 1, 10) AND model = NEW.model AND key_id = COALESCE(NEW.key_id, 0);
    INSERT OR IGNORE INTO latency_hourly (team_id, hour, model, key_id) VALUES (NEW.team_id, replace(substr(NEW.created_at, 1, 13), 'T', ' '), NEW.model, COALESCE(NEW.key_id, 0));
    UPDATE latency_hourly SET
        requests = requests + 1,
        timed = timed + (NEW.ttft_ms IS NOT NULL),
        timed_completion_tokens = timed_completion_tokens + CASE WHEN NEW.ttft_ms IS NOT NULL THEN NEW.completion_tokens ELSE 0 END,
        generation_ms = generation_ms + COALESCE(NEW.generation_ms, 0),
        ttft_b00 = ttft_b00 + COALESCE((NEW.ttft_ms < 10), 0),
        ttft_b01 = ttft_b01 + COALESCE((NEW.ttft_ms >= 10 AND NEW.ttft_ms < 25), 0),
        ttft_b02 = ttft_b02 + COALESCE((NEW.ttft_ms >= 25 AND NEW.ttft_ms < 50), 0),
        ttft_b03 = ttft_b03 + COALESCE((NEW.ttft_ms >= 50 AND NEW.ttft_ms < 100), 0),
        ttft_b04 = ttft_b04 + COALESCE((NEW.ttft_ms >= 100 AND NEW.ttft_ms < 200), 0),
        ttft_b05 = ttft_b05 + COALESCE((NEW.ttft_ms >= 200 AND NEW.ttft_ms < 300), 0),
        ttft_b06 = ttft_b06 + COALESCE((NEW.ttft_ms >= 300 AND NEW.ttft_ms < 500), 0),
        ttft_b07 = ttft_b07 + COALESCE((NEW.ttft_ms >= 500 AND NEW.ttft_ms < 750), 0),
        ttft_b08 = ttft_b08 + COALESCE((NEW.ttft_ms >= 750 AND NEW.ttft_ms < 1000), 0),
        ttft_b09 = ttft_b09 + COALESCE((NEW.ttft_ms >= 1000 AND NEW.ttft_ms < 1500), 0),
        ttft_b10 = ttft_b10 + COALESCE((NEW.ttft_ms >= 1500 AND NEW.ttft_ms < 2000), 0),
        ttft_b11 = ttft_b11 + COALESCE((NEW.ttft_ms >= 2000 AND NEW.ttft_ms < 3000), 0),
        ttft_b12 = ttft_b12 + COALESCE((NEW.ttft_ms >= 3000 AND NEW.ttft_ms < 5000), 0),
        ttft_b13 = ttft_b13 + COALESCE((NEW.ttft_ms >= 5000 AND NEW.ttft_ms < 10000), 0),
        ttft_b14 = ttft_b14 + COALESCE((NEW.ttft_ms >= 10000 AND NEW.ttft_ms < 30000), 0),
        ttft_b15 = ttft_b15 + COALESCE((NEW.ttft_ms >= 30000), 0),
        queue_b00 = queue_b00 + COALESCE((NEW.queue_ms < 10), 0),
        queue_b01 = queue_b01 + COALESCE((NEW.queue_ms >= 10 AND NEW.queue_ms < 25), 0),
        queue_b02 = queue_b02 + COALESCE((NEW.queue_ms >= 25 AND NEW.queue_ms < 50), 0),
        queue_b03 = queue_b03 + COALESCE((NEW.queue_ms >= 50 AND NEW.queue_ms < 100), 0),
        queue_b04 = queue_b04 + COALESCE((NEW.queue_ms >= 100 AND NEW.queue_ms < 200), 0),
        queue_b05 = queue_b05 + COALESCE((NEW.queue_ms >= 200 AND NEW.queue_ms < 300), 0),
        queue_b06 = queue_b06 + COALESCE((NEW.queue_ms >= 300 AND NEW.queue_ms < 500), 0),
        queue_b07 = queue_b07 + COALESCE((NEW.queue_ms >= 500 AND NEW.queue_ms < 750), 0),
        queue_b08 = queue_b08 + COALESCE((NEW.queue_ms >= 750 AND NEW.queue_ms < 1000), 0),
        queue_b09 = queue_b09 + COALESCE((NEW.queue_ms >= 1000 AND NEW.queue_ms < 1500), 0),
        queue_b10 = queue_b10 + COALESCE((NEW.queue_ms >= 1500 AND NEW.queue_ms < 2000), 0),
        queue_b11 = queue_b11 + COALESCE((NEW.queue_ms >= 2000 AND NEW.queue_ms < 3000), 0),
        queue_b12 = queue_b12 + COALESCE((NEW.queue_ms >= 3000 AND NEW.queue_ms < 5000), 0),
        queue_b13 = queue_b13 + COALESCE((NEW.queue_ms >= 5000 AND NEW.queue_ms < 10000), 0),
        queue_b14 = queue_b14 + COALESCE((NEW.queue_ms >= 10000 AND NEW.queue_ms < 30000), 0),
        queue_b15 = queue_b15 + COALESCE((NEW.queue_ms >= 30000), 0)
    WHERE team_id = NEW.team_id AND hour = replace(substr(NEW.created_at, 1, 13), 'T', ' ') AND model = NEW.model AND key_id = COALESCE(NEW.key_id, 0);
END;
