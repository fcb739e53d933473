-- 0008_team_released: when Terraform last let go of a team. The platform
-- keeps a team for its ledger, so destroying an llmplat_team releases it
-- instead of deleting it, and a later create-only request of the same name
-- takes a released team back (clearing this) instead of refusing it. A team
-- made outside Terraform is never released, so never taken. NULL: held.
ALTER TABLE teams ADD COLUMN released_at TIMESTAMPTZ;
