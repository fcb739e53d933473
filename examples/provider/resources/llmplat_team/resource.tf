resource "llmplat_team" "search" {
  name = "search"

  # Members may mint personal keys in the console, each living at most
  # 30 days; the keys declared here stay read-only there.
  self_service_keys     = true
  personal_key_max_days = 30
}

output "search_available_microcredits" {
  value = llmplat_team.search.available_microcredits
}
