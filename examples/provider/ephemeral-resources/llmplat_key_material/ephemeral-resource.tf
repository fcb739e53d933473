resource "llmplat_team" "batch" {
  name = "batch"
}

# A fresh secret each run, never in plan or state.
ephemeral "llmplat_key_material" "k" {}

resource "llmplat_api_key" "batch" {
  team_id           = llmplat_team.batch.id
  secret_wo         = ephemeral.llmplat_key_material.k.secret
  secret_wo_version = 1
}
