-- Budget charges: one row per allowed decision that costs something. The
-- engine sums a session's rows over its rolling window; Prune drops rows that
-- fell out of every window.
CREATE TABLE charges (
	id             INTEGER PRIMARY KEY,
	session_id     TEXT    NOT NULL,
	decision_id    TEXT    NOT NULL,
	at_ms          INTEGER NOT NULL,
	deletes        INTEGER NOT NULL CHECK (deletes >= 0),
	external_sends INTEGER NOT NULL CHECK (external_sends >= 0),
	objects        INTEGER NOT NULL CHECK (objects >= 0)
);

CREATE INDEX charges_session_at ON charges (session_id, at_ms);
CREATE INDEX charges_at ON charges (at_ms);
