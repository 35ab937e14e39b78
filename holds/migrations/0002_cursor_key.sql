-- The HMAC key of list cursors, drawn once per database (by the store, from
-- crypto/rand) so that a cursor stays valid across restarts.
CREATE TABLE holds_cursor_key (
	id  INTEGER PRIMARY KEY CHECK (id = 1),
	key BLOB    NOT NULL CHECK (length(key) = 32)
);
