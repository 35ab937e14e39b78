-- The gate of the portal-issued credential that raised a hold ('' when it
-- came with SVC_AUTH_TOKEN or no credential): a re-submission must come
-- through the same gate to redeem it. Holds raised before this column
-- existed read '' and stay redeemable as before.
ALTER TABLE holds ADD COLUMN gate TEXT NOT NULL DEFAULT '';
