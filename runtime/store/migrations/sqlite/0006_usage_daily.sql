-- 0006_usage_daily: a rollup of settled usage per team, UTC day of
-- created_at (its first ten characters: rows are stamped in UTC), and
-- model, kept exact by triggers on usage_ledger in the transaction that
-- changes the row (see the PostgreSQL file). SQLite has one writer at a
-- time, so the triggers are plain row triggers.
CREATE TABLE usage_daily (
    team_id           BIGINT NOT NULL REFERENCES teams (id),
    day               TEXT NOT NULL,
    model             TEXT NOT NULL,
    requests          INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_microcredits INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (team_id, day, model)
);

INSERT INTO usage_daily (team_id, day, model, requests, prompt_tokens, completion_tokens, cost_microcredits)
SELECT team_id, substr(created_at, 1, 10), model, COUNT(*),
    TOTAL(prompt_tokens), TOTAL(completion_tokens), TOTAL(cost_microcredits)
FROM usage_ledger WHERE status = 'settled'
GROUP BY 1, 2, 3;

CREATE TRIGGER usage_daily_remove AFTER UPDATE ON usage_ledger
WHEN OLD.status = 'settled'
BEGIN
    UPDATE usage_daily SET requests = requests - 1,
        prompt_tokens = prompt_tokens - OLD.prompt_tokens,
        completion_tokens = completion_tokens - OLD.completion_tokens,
        cost_microcredits = cost_microcredits - OLD.cost_microcredits
    WHERE team_id = OLD.team_id AND day = substr(OLD.created_at, 1, 10) AND model = OLD.model;
END;

CREATE TRIGGER usage_daily_delete AFTER DELETE ON usage_ledger
WHEN OLD.status = 'settled'
BEGIN
    UPDATE usage_daily SET requests = requests - 1,
        prompt_tokens = prompt_tokens - OLD.prompt_tokens,
        completion_tokens = completion_tokens - OLD.completion_tokens,
        cost_microcredits = cost_microcredits - OLD.cost_microcredits
    WHERE team_id = OLD.team_id AND day = substr(OLD.created_at, 1, 10) AND model = OLD.model;
END;

CREATE TRIGGER usage_daily_add_update AFTER UPDATE ON usage_ledger
WHEN NEW.status = 'settled'
BEGIN
    INSERT OR IGNORE INTO usage_daily (team_id, day, model) VALUES (NEW.team_id, substr(NEW.created_at, 1, 10), NEW.model);
    UPDATE usage_daily SET requests = requests + 1,
        prompt_tokens = prompt_tokens + NEW.prompt_tokens,
        completion_tokens = completion_tokens + NEW.completion_tokens,
        cost_microcredits = cost_microcredits + NEW.cost_microcredits
    WHERE team_id = NEW.team_id AND day = substr(NEW.created_at, 1, 10) AND model = NEW.model;
END;

CREATE TRIGGER usage_daily_add_insert AFTER INSERT ON usage_ledger
WHEN NEW.status = 'settled'
BEGIN
    INSERT OR IGNORE INTO usage_daily (team_id, day, model) VALUES (NEW.team_id, substr(NEW.created_at, 1, 10), NEW.model);
    UPDATE usage_daily SET requests = requests + 1,
        prompt_tokens = prompt_tokens + NEW.prompt_tokens,
        completion_tokens = completion_tokens + NEW.completion_tokens,
        cost_microcredits = cost_microcredits + NEW.cost_microcredits
    WHERE team_id = NEW.team_id AND day = substr(NEW.created_at, 1, 10) AND model = NEW.model;
END;
