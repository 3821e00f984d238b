CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    archived_at INTEGER,
    execution_status TEXT NOT NULL,
    agent_kind TEXT NOT NULL,
    working_dir TEXT NOT NULL,
    workspace_owned INTEGER NOT NULL,
    always_confirm INTEGER NOT NULL DEFAULT 0,
    event_count INTEGER NOT NULL DEFAULT 0,
    last_event_at INTEGER,
    runtime_error_code TEXT,
    runtime_error_message TEXT
);
CREATE INDEX conversations_by_created ON conversations (created_at, id);
CREATE INDEX conversations_by_updated ON conversations (updated_at, id);
CREATE INDEX conversations_by_status ON conversations (execution_status);
CREATE TABLE events (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    timestamp INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX events_by_id ON events (conversation_id, id);
