-- The PostgreSQL twin of sqlite/001: times are milliseconds since the epoch (BIGINT), flags are
-- 0/1 integers, exactly as on SQLite, so the same statements serve both.
CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    archived_at BIGINT,
    execution_status TEXT NOT NULL,
    agent_kind TEXT NOT NULL,
    working_dir TEXT NOT NULL,
    workspace_owned INTEGER NOT NULL,
    always_confirm INTEGER NOT NULL DEFAULT 0,
    event_count BIGINT NOT NULL DEFAULT 0,
    last_event_at BIGINT,
    runtime_error_code TEXT,
    runtime_error_message TEXT
);
CREATE INDEX conversations_by_created ON conversations (created_at, id);
CREATE INDEX conversations_by_updated ON conversations (updated_at, id);
CREATE INDEX conversations_by_status ON conversations (execution_status);
CREATE TABLE events (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    timestamp BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE UNIQUE INDEX events_by_id ON events (conversation_id, id);
-- The database's clock, in milliseconds: every lease expiry is computed with it, never with a
-- replica's clock. clock_timestamp(), not now(): it moves inside a long transaction too.
CREATE OR REPLACE FUNCTION agentdeck_now_ms() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$ SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT $$;
