-- The bash events of /api/bash (BashCommand, BashOutput, BashError), kept across restarts and
-- searched here: the newest BashEventStore::MaxStored stay. `output_order` is a BashOutput's
-- part number (OpenHands' `order`), null for the other kinds.
CREATE TABLE bash_events (
    number BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    command_id TEXT,
    output_order INTEGER,
    timestamp_ms BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX bash_events_command ON bash_events (command_id, number);
CREATE INDEX bash_events_time ON bash_events (timestamp_ms, number);
