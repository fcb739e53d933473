# A team is imported by its numeric id (GET /admin/teams lists them).
terraform import llmplat_team.search 42
