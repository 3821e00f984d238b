-- A conversation being deleted: its history goes a batch at a time, and from the first batch it
-- is gone to every read, here and on other replicas. A server stopped or killed meanwhile
-- finishes the delete when it starts again: before, a crash left the oldest part of the history
-- under a row that still counted every event, and the next event's seq skipped the rest.
CREATE TABLE pending_deletes (conversation_id TEXT PRIMARY KEY);
