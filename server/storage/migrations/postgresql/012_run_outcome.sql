-- How the last action of a conversation's run ended (ConversationInfo::outcome), as its wire
-- JSON without `dismissed`; NULL until one ended. Written in the transaction of the
-- observation or status change that causes it.
ALTER TABLE conversations ADD COLUMN outcome TEXT;
-- The operator acknowledged the outcome (dismissed it, or ran the conversation again).
ALTER TABLE conversations ADD COLUMN outcome_dismissed INTEGER NOT NULL DEFAULT 0;
