resource "llmplat_team" "search" {
  name = "search"
}

# A grant: recorded once in the ledger, whatever is spent afterwards.
resource "llmplat_credit" "search_2026_q4" {
  team_id             = llmplat_team.search.id
  amount_microcredits = 250000000000 # 250,000 credits
  note                = "2026 Q4 budget"
}

# A correction is another grant, negative.
resource "llmplat_credit" "search_2026_q4_correction" {
  team_id             = llmplat_team.search.id
  amount_microcredits = -10000000000
  note                = "2026 Q4 budget: over-granted"
}
