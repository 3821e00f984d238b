-- Where a run of the shell or echo agent starts reading: each agent message answers the oldest
-- user message still open, and at the last point where none was open everything before is
-- settled. `append` keeps both up to date; this fills them in for the histories already stored.
-- open_messages is the walk of +1 per user message and -1 per agent message, never below zero,
-- at its end; answered_through is the last seq where the walk is at its lowest (0 if never at
-- or below zero).
ALTER TABLE conversations ADD COLUMN open_messages INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN answered_through INTEGER NOT NULL DEFAULT 0;
UPDATE conversations
SET open_messages = settled.open_messages, answered_through = settled.answered_through
FROM (
    SELECT conversation_id,
           MAX(CASE WHEN seq = last_seq THEN walk END) - MIN(0, MIN(lowest)) AS open_messages,
           CASE WHEN MIN(lowest) <= 0 THEN MAX(CASE WHEN walk = lowest THEN seq END) ELSE 0 END
               AS answered_through
    FROM (
        SELECT conversation_id, seq, walk,
               MIN(walk) OVER (PARTITION BY conversation_id) AS lowest,
               MAX(seq) OVER (PARTITION BY conversation_id) AS last_seq
        FROM (
            SELECT conversation_id, seq,
                   SUM(CASE WHEN source = 'user' THEN 1 ELSE -1 END)
                       OVER (PARTITION BY conversation_id ORDER BY seq) AS walk
            FROM events
            WHERE kind = 'MessageEvent' AND source IN ('user', 'agent')
        ) AS steps
    ) AS walks
    GROUP BY conversation_id
) AS settled
WHERE settled.conversation_id = conversations.id;
