-- 0001_init: the tables of migrations/postgres/0001_init.sql for SQLite
-- (comments on their meaning are there). ENUMs are TEXT with a CHECK, JSONB
-- is TEXT holding a JSON array, BYTEA is BLOB. TIMESTAMP columns hold UTC
-- text the driver reads back as time.Time; their default has the driver's
-- format. A TEXT primary key is NOT NULL explicitly: SQLite would allow NULL.

CREATE TABLE teams (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    name                 TEXT NOT NULL UNIQUE,
    balance_microcredits BIGINT NOT NULL DEFAULT 0,
    created_at           TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'))
);

CREATE TABLE models (
    name                            TEXT NOT NULL PRIMARY KEY,
    served_name                     TEXT NOT NULL,
    prompt_price_micro_per_mtok     BIGINT NOT NULL CHECK (prompt_price_micro_per_mtok >= 0),
    completion_price_micro_per_mtok BIGINT NOT NULL CHECK (completion_price_micro_per_mtok >= 0),
    max_context_tokens              INTEGER NOT NULL CHECK (max_context_tokens > 0),
    max_output_tokens               INTEGER NOT NULL CHECK (max_output_tokens > 0),
    created_at                      TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')),
    updated_at                      TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')),
    CHECK (max_output_tokens <= max_context_tokens)
);

CREATE TABLE api_keys (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    team_id         BIGINT NOT NULL REFERENCES teams (id),
    name            TEXT NOT NULL DEFAULT '',
    prefix          TEXT NOT NULL,
    hash            BLOB NOT NULL UNIQUE,
    model_allowlist TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(model_allowlist) AND json_type(model_allowlist) = 'array'),
    rpm             INTEGER CHECK (rpm > 0),
    tokens_per_day  BIGINT CHECK (tokens_per_day > 0),
    max_streams     INTEGER CHECK (max_streams > 0),
    expires_at      TIMESTAMP,
    revoked_at      TIMESTAMP,
    created_at      TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'))
);
CREATE INDEX api_keys_team_idx ON api_keys (team_id);

CREATE TABLE usage_ledger (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id            TEXT NOT NULL UNIQUE,
    team_id               BIGINT NOT NULL REFERENCES teams (id),
    key_id                BIGINT REFERENCES api_keys (id),
    model                 TEXT NOT NULL,
    prompt_tokens         BIGINT NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens     BIGINT NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
    reserved_microcredits BIGINT NOT NULL CHECK (reserved_microcredits >= 0),
    cost_microcredits     BIGINT NOT NULL DEFAULT 0 CHECK (cost_microcredits >= 0),
    status                TEXT NOT NULL DEFAULT 'reserved' CHECK (status IN ('reserved', 'settled', 'cancelled')),
    settled_from          TEXT CHECK (settled_from IN ('exact', 'partial', 'estimate', 'node_log')),
    created_at            TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')),
    settled_at            TIMESTAMP,
    CHECK ((status = 'settled') = (settled_from IS NOT NULL)),
    CHECK ((status = 'reserved') = (settled_at IS NULL))
);
CREATE INDEX usage_ledger_sweep_idx ON usage_ledger (status, created_at);
CREATE INDEX usage_ledger_team_idx ON usage_ledger (team_id, created_at);

CREATE TABLE credit_entries (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    team_id             BIGINT NOT NULL REFERENCES teams (id),
    idempotency_key     TEXT NOT NULL UNIQUE,
    amount_microcredits BIGINT NOT NULL CHECK (amount_microcredits <> 0),
    note                TEXT NOT NULL DEFAULT '',
    created_at          TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'))
);
CREATE INDEX credit_entries_team_idx ON credit_entries (team_id, created_at);

CREATE TABLE nodes (
    id              TEXT NOT NULL PRIMARY KEY,
    location        TEXT NOT NULL CHECK (location IN ('cloud', 'onprem')),
    gpus            INTEGER NOT NULL DEFAULT 0 CHECK (gpus >= 0),
    gpu_model       TEXT NOT NULL DEFAULT '',
    models          TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(models) AND json_type(models) = 'array'),
    service_url     TEXT,
    last_seen       TIMESTAMP,
    orchestrator_id TEXT,
    state           TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining', 'drained', 'gone')),
    created_at      TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'))
);

CREATE TABLE node_tokens (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id    TEXT NOT NULL,
    hash       BLOB NOT NULL UNIQUE,
    created_at TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')),
    revoked_at TIMESTAMP
);
CREATE INDEX node_tokens_node_idx ON node_tokens (node_id);

CREATE TABLE node_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id         TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('register', 'drain', 'deregister', 'revoke')),
    orchestrator_id TEXT,
    detail          TEXT NOT NULL DEFAULT '',
    created_at      TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'))
);
CREATE INDEX node_events_node_idx ON node_events (node_id, created_at);
