-- What a hold is bound to (engine.HoldBinding: sha256 hex of its envelope
-- hash, params hash, folded agent id and on_behalf_of, and gate), so that a
-- require_approval of an identical action finds the live hold to reuse
-- instead of raising another. Holds raised before this column existed read
-- NULL and are never reused.
ALTER TABLE holds ADD COLUMN binding TEXT;
CREATE INDEX holds_binding ON holds (binding, status, expires_ms) WHERE binding IS NOT NULL;
