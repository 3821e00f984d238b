-- Ownership: a lease with a fencing epoch on every conversation, expiry on the database clock
-- (agentdeck_now_ms()). Events remember the epoch they were written under.
ALTER TABLE conversations ADD COLUMN lease_owner TEXT;
ALTER TABLE conversations ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN lease_expires_at BIGINT;
ALTER TABLE conversations ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
CREATE INDEX conversations_by_lease_owner ON conversations (lease_owner);
