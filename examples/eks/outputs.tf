output "gateway_url" {
  description = "The OpenAI-compatible API: <gateway_url>/v1."
  value       = module.eks.gateway.url
}

output "kubeconfig" {
  description = "A kubeconfig for the cluster (tokens from aws eks get-token)."
  value       = module.eks.kubeconfig
}

output "models" {
  description = "Each model's engine flags, as the capacity planner sized them."
  value       = module.addons.models
}
