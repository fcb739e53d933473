resource "llmplat_team" "search" {
  name = "search"
}

output "search_available_microcredits" {
  value = llmplat_team.search.available_microcredits
}
