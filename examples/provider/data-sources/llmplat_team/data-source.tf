resource "llmplat_team" "search" {
  name = "search"
}

data "llmplat_team" "search" {
  name = llmplat_team.search.name
}

output "search_balance_microcredits" {
  value = data.llmplat_team.search.balance_microcredits
}
