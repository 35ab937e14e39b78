-- Budgets per agent and per principal, and the money budget: each charge
-- also names the (folded) agent and principal it is counted against ('' for
-- none) and the money it moved, in units of 1/10 000 of its ISO 4217
-- currency ('' and 0 for none). A covering index per subject answers each
-- budget read from the index alone.
ALTER TABLE charges ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE charges ADD COLUMN principal_id TEXT NOT NULL DEFAULT '';
ALTER TABLE charges ADD COLUMN currency TEXT NOT NULL DEFAULT '';
ALTER TABLE charges ADD COLUMN amount INTEGER NOT NULL DEFAULT 0 CHECK (amount >= 0);
DROP INDEX charges_session_totals;
CREATE INDEX charges_session_totals ON charges (session_id, at_ms, deletes, external_sends, objects, currency, amount);
CREATE INDEX charges_agent_totals ON charges (agent_id, at_ms, deletes, external_sends, objects, currency, amount);
CREATE INDEX charges_principal_totals ON charges (principal_id, at_ms, deletes, external_sends, objects, currency, amount);
