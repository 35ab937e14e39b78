-- Holds created by require_approval decisions (spec §2.3, §3). Times are Unix
-- milliseconds; the status column holds the last recorded transition, and a
-- pending or approved row past expires_ms reads as expired.
CREATE TABLE holds (
	id                      TEXT PRIMARY KEY,
	status                  TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'consumed')),
	rule                    TEXT NOT NULL,
	reason                  TEXT NOT NULL,
	envelope                TEXT NOT NULL,
	envelope_hash           TEXT NOT NULL,
	params_hash             TEXT NOT NULL,
	agent_id                TEXT NOT NULL,
	on_behalf_of            TEXT NOT NULL,
	session_id              TEXT NOT NULL,
	created_ms              INTEGER NOT NULL,
	expires_ms              INTEGER NOT NULL,
	decided_by_type         TEXT,
	decided_by_id           TEXT,
	decided_ms              INTEGER,
	decided_verified        INTEGER,
	resolution_reason       TEXT NOT NULL DEFAULT '',
	consumed_ms             INTEGER,
	decision_id             TEXT NOT NULL,
	consumed_by_decision_id TEXT
);

CREATE INDEX holds_created ON holds (created_ms, id);
CREATE INDEX holds_status_created ON holds (status, created_ms, id);
CREATE INDEX holds_status_expires ON holds (status, expires_ms);
