data "llmplat_models" "all" {}

output "model_names" {
  value = data.llmplat_models.all.names
}
