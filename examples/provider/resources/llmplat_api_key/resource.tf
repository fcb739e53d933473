resource "llmplat_team" "search" {
  name = "search"
}

# A key whose secret the platform generates: it lands in state, sensitive.
# Changing rotation rotates it in place (same id, new secret).
resource "llmplat_api_key" "ci" {
  team_id         = llmplat_team.search.id
  name            = "ci pipeline"
  model_allowlist = ["llama-8b"]
  rpm             = 600
  tokens_per_day  = 2000000
  max_streams     = 8
  max_tokens      = 2048
  expires_at      = "2030-01-01T00:00:00Z"
  rotation        = "2026-12"
}

# A key whose secret never lands in state: minted by the ephemeral
# llmplat_key_material, given write-only (Terraform 1.11 or later), and in
# the same run handed to where its user reads it (a write-only attribute of
# a secret store). Raising secret_wo_version rotates to a new minted secret.
ephemeral "llmplat_key_material" "batch" {}

resource "llmplat_api_key" "batch" {
  team_id           = llmplat_team.search.id
  name              = "batch jobs"
  max_streams       = 32
  secret_wo         = ephemeral.llmplat_key_material.batch.secret
  secret_wo_version = 1
}
