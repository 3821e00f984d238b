-- When the conversation began running (ms since the epoch), null while it is not: what the
-- console's "running for" counts from.
ALTER TABLE conversations ADD COLUMN running_since INTEGER;
