-- Runtime expiry is marked before anything is deleted; runtime_cleaned says the deletion ended.
ALTER TABLE conversations ADD COLUMN runtime_expired_at BIGINT;
ALTER TABLE conversations ADD COLUMN runtime_cleaned INTEGER NOT NULL DEFAULT 0;
CREATE INDEX conversations_by_archived ON conversations (archived_at);
