-- A conversation's own sandbox policy (JSON, see SandboxPolicy); NULL: the server's.
ALTER TABLE conversations ADD COLUMN sandbox_policy TEXT;
