-- The gate of the portal-issued credential that raised a hold ('' when it
-- came with SVC_AUTH_TOKEN or no credential): a re-submission must come
-- through the same gate to redeem it. Holds raised before this column
-- existed read NULL, "gate unknown", and are not bound to a gate, as
-- before.
ALTER TABLE holds ADD COLUMN gate TEXT;
