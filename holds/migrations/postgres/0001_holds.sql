-- The hold store's tables on PostgreSQL, as the SQLite migrations 0001-0004
-- leave them (see there for the meaning of each column). Times are Unix
-- milliseconds.
CREATE TABLE holds (
	id                      TEXT PRIMARY KEY,
	status                  TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'consumed')),
	rule                    TEXT NOT NULL,
	reason                  TEXT NOT NULL,
	envelope                TEXT NOT NULL,
	envelope_hash           TEXT NOT NULL,
	params_hash             TEXT NOT NULL,
	gate                    TEXT,
	agent_id                TEXT NOT NULL,
	on_behalf_of            TEXT NOT NULL,
	session_id              TEXT NOT NULL,
	created_ms              BIGINT NOT NULL,
	expires_ms              BIGINT NOT NULL,
	decided_by_type         TEXT,
	decided_by_id           TEXT,
	decided_ms              BIGINT,
	decided_verified        BOOLEAN,
	resolution_reason       TEXT NOT NULL DEFAULT '',
	consumed_ms             BIGINT,
	decision_id             TEXT NOT NULL,
	consumed_by_decision_id TEXT,
	binding                 TEXT
);

CREATE INDEX holds_created ON holds (created_ms, id);
CREATE INDEX holds_status_created ON holds (status, created_ms, id);
CREATE INDEX holds_status_expires ON holds (status, expires_ms);
CREATE INDEX holds_binding ON holds (binding, status, expires_ms) WHERE binding IS NOT NULL;

CREATE TABLE holds_cursor_key (
	id  INTEGER PRIMARY KEY CHECK (id = 1),
	key BYTEA   NOT NULL CHECK (length(key) = 32)
);
