-- The names of the secrets a conversation was given (POST .../secrets), as a JSON array; never
-- their values, which stay in the memory of the server that got them. After a restart the
-- names tell which ones to send again (runtime_info.missing_secrets).
ALTER TABLE conversations ADD COLUMN secret_names TEXT NOT NULL DEFAULT '[]';
