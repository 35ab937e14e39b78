-- Audit mirror: one row per audit record, committed in the same batch as the
-- JSONL line. body is the record exactly as written to the JSONL file.
CREATE TABLE audit (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	ts_ms       INTEGER NOT NULL,
	kind        TEXT    NOT NULL,
	decision_id TEXT,
	body        TEXT    NOT NULL
);
