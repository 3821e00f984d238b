-- The agent's settings (JSON, never a secret) and language model usage counters.
ALTER TABLE conversations ADD COLUMN agent_config TEXT;
ALTER TABLE conversations ADD COLUMN prompt_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN completion_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN llm_requests BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN llm_retries BIGINT NOT NULL DEFAULT 0;
