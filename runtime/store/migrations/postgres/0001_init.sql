-- 0001_init: teams and their money, models, API keys, the usage ledger, and
-- the durable part of the node registry.
-- Money is integer micro-credits (1 credit = 1 USD = 1,000,000 micro-credits);
-- prices are micro-credits per million tokens. Times are TIMESTAMPTZ.
-- migrations/sqlite/0001_init.sql holds the same tables for SQLite.

CREATE TYPE usage_status AS ENUM ('reserved', 'settled', 'cancelled');
CREATE TYPE settle_source AS ENUM ('exact', 'partial', 'estimate', 'node_log');
CREATE TYPE node_location AS ENUM ('cloud', 'onprem');

CREATE TABLE teams (
    id                   BIGSERIAL PRIMARY KEY,
    name                 TEXT NOT NULL UNIQUE,
    balance_microcredits BIGINT NOT NULL DEFAULT 0,
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE models (
    name                            TEXT PRIMARY KEY,
    served_name                     TEXT NOT NULL,
    prompt_price_micro_per_mtok     BIGINT NOT NULL CHECK (prompt_price_micro_per_mtok >= 0),
    completion_price_micro_per_mtok BIGINT NOT NULL CHECK (completion_price_micro_per_mtok >= 0),
    max_context_tokens              INTEGER NOT NULL CHECK (max_context_tokens > 0),
    max_output_tokens               INTEGER NOT NULL CHECK (max_output_tokens > 0),
    created_at                      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at                      TIMESTAMPTZ NOT NULL DEFAULT now(),
    CHECK (max_output_tokens <= max_context_tokens)
);

-- api_keys: only the hash of a key is stored; prefix is the part shown to
-- users. A NULL limit means the key has none.
CREATE TABLE api_keys (
    id              BIGSERIAL PRIMARY KEY,
    team_id         BIGINT NOT NULL REFERENCES teams (id),
    name            TEXT NOT NULL DEFAULT '',
    prefix          TEXT NOT NULL,
    hash            BYTEA NOT NULL UNIQUE,
    model_allowlist JSONB NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(model_allowlist) = 'array'),
    rpm             INTEGER CHECK (rpm > 0),
    tokens_per_day  BIGINT CHECK (tokens_per_day > 0),
    max_streams     INTEGER CHECK (max_streams > 0),
    expires_at      TIMESTAMPTZ,
    revoked_at      TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_team_idx ON api_keys (team_id);

-- usage_ledger: one row per request, reserved before the GPU works and
-- settled (or cancelled) once; request_id makes a retried settle a no-op.
-- key_id is NULL for requests authenticated by JWT. settled_at is when the
-- row left 'reserved'; settled_from says where a settled row's counts came
-- from.
CREATE TABLE usage_ledger (
    id                    BIGSERIAL PRIMARY KEY,
    request_id            TEXT NOT NULL UNIQUE,
    team_id               BIGINT NOT NULL REFERENCES teams (id),
    key_id                BIGINT REFERENCES api_keys (id),
    model                 TEXT NOT NULL,
    prompt_tokens         BIGINT NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens     BIGINT NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
    reserved_microcredits BIGINT NOT NULL CHECK (reserved_microcredits >= 0),
    cost_microcredits     BIGINT NOT NULL DEFAULT 0 CHECK (cost_microcredits >= 0),
    status                usage_status NOT NULL DEFAULT 'reserved',
    settled_from          settle_source,
    created_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    settled_at            TIMESTAMPTZ,
    CHECK ((status = 'settled') = (settled_from IS NOT NULL)),
    CHECK ((status = 'reserved') = (settled_at IS NULL))
);
CREATE INDEX usage_ledger_sweep_idx ON usage_ledger (status, created_at);
CREATE INDEX usage_ledger_team_idx ON usage_ledger (team_id, created_at);

-- credit_entries: grants (positive) and corrections (negative) of credit;
-- idempotency_key makes a retried grant a no-op.
CREATE TABLE credit_entries (
    id                  BIGSERIAL PRIMARY KEY,
    team_id             BIGINT NOT NULL REFERENCES teams (id),
    idempotency_key     TEXT NOT NULL UNIQUE,
    amount_microcredits BIGINT NOT NULL CHECK (amount_microcredits <> 0),
    note                TEXT NOT NULL DEFAULT '',
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX credit_entries_team_idx ON credit_entries (team_id, created_at);

-- nodes: heartbeats live in Redis; last_seen moves only on registration and
-- drain. service_url is set for cloud nodes, reached through their Service.
CREATE TABLE nodes (
    id              TEXT PRIMARY KEY,
    location        node_location NOT NULL,
    gpus            INTEGER NOT NULL DEFAULT 0 CHECK (gpus >= 0),
    gpu_model       TEXT NOT NULL DEFAULT '',
    models          JSONB NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(models) = 'array'),
    service_url     TEXT,
    last_seen       TIMESTAMPTZ,
    orchestrator_id TEXT,
    state           TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining', 'drained', 'gone')),
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- node_tokens: a token may be issued before its node first registers, so
-- node_id does not reference nodes.
CREATE TABLE node_tokens (
    id         BIGSERIAL PRIMARY KEY,
    node_id    TEXT NOT NULL,
    hash       BYTEA NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at TIMESTAMPTZ
);
CREATE INDEX node_tokens_node_idx ON node_tokens (node_id);

-- node_events: registrations and drains, never heartbeats.
CREATE TABLE node_events (
    id              BIGSERIAL PRIMARY KEY,
    node_id         TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('register', 'drain', 'deregister', 'revoke')),
    orchestrator_id TEXT,
    detail          TEXT NOT NULL DEFAULT '',
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX node_events_node_idx ON node_events (node_id, created_at);
