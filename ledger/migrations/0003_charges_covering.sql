-- The budget read of every decision sums a session's charges over its
-- window. An index that carries the summed columns answers it from the index
-- alone, without a table lookup per charge; it replaces the narrower index.
DROP INDEX charges_session_at;
CREATE INDEX charges_session_totals ON charges (session_id, at_ms, deletes, external_sends, objects);
