-- Every change to a conversation or a runtime that a client, a policy or the server made
-- (AuditLog): when (the database's clock), by whom (a key's name and the client, or "server" and
-- the policy), what, to which conversation, through which replica, why, and how it ended (the
-- answer's status: 2xx done, else refused). Kept for --audit-retention.
CREATE TABLE audit_log (
    number INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms INTEGER NOT NULL,
    actor TEXT NOT NULL,
    client TEXT NOT NULL,
    action TEXT NOT NULL,
    conversation_id TEXT,
    replica TEXT NOT NULL,
    reason TEXT NOT NULL,
    status INTEGER NOT NULL
);
CREATE INDEX audit_log_time ON audit_log (at_ms, number);
CREATE INDEX audit_log_conversation ON audit_log (conversation_id, number);
CREATE INDEX audit_log_actor ON audit_log (actor, number);
