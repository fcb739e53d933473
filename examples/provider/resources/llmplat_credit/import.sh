# A grant is imported by its ledger entry's id (the "id" of
# POST /admin/credits' answer); team, amount, note and idempotency key are
# read back, so declare the same team, amount and note.
terraform import llmplat_credit.march 42
