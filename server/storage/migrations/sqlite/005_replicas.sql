-- Every server process that ever served this catalog: its lease owner name (`instance`), where
-- clients can reach it, and a heartbeat on the database's clock.
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    instance TEXT NOT NULL,
    advertise_url TEXT,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    stopped_at INTEGER
);
CREATE INDEX replicas_by_instance ON replicas (instance);
