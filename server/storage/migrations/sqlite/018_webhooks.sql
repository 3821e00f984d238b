-- Each --webhook's delivery (WebhookDelivery): the audit record it was given last (acknowledged
-- with a 2xx, or given up), the failure of the record after it, and the replica that delivers it
-- (one at a time, for as long as its lease lasts). Keyed by the SHA-256 of the option's value:
-- its URL may hold a credential.
CREATE TABLE webhooks (
    id TEXT NOT NULL PRIMARY KEY,
    delivered_number INTEGER NOT NULL,
    failing_since_ms INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    given_up INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    lease_until_ms INTEGER NOT NULL DEFAULT 0
);
