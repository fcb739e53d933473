output "description" {
  description = "The whole platform description this layer rendered (for `llmplat render` and GitOps)."
  value       = yamlencode(local.description)
}

output "models" {
  description = "Each model's engine flags, as the planner sized them."
  value = { for name, m in llmplat_model.this : name => {
    max_num_seqs    = m.deployment.max_num_seqs
    max_model_len   = m.deployment.max_model_len
    kv_cache_tokens = m.deployment.kv_cache_tokens
  } }
}
