-- Each replica's own liveness window (half its lease TTL), by which the others judge its
-- heartbeat: they used theirs, and a replica with a shorter --lease-ttl took one that beats
-- less often for stopped (503 owner_unresponsive, `alive: false`). NULL for a replica
-- registered before: judged by the viewer's window, as before.
ALTER TABLE replicas ADD COLUMN liveness_window_ms BIGINT;
