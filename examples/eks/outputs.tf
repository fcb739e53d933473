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

output "model_bucket" {
  description = "Upload weights to s3://<model_bucket>/<model>/<revision>/."
  value       = module.eks.model_bucket
}

output "node_agents_url" {
  description = "Where on-premises node agents dial out to (llmplat_onprem_node's orchestrator_url)."
  value       = module.eks.gateway.nodes_url
}

output "certificate_validations" {
  description = "The records that validate the gateway's certificate, for a DNS provider other than Route 53 (the guide's step 1)."
  value       = module.eks.certificate_validations
}

output "gateway_lb_dns_name" {
  description = "The gateway's load balancer: point gateway_domain at it when Route 53 does not."
  value       = module.eks.gateway.lb_dns_name
}

output "engine_repository_url" {
  description = "The ECR repository to copy vLLM's image into; deploy it by digest with engine_digest (the guide's step 1)."
  value       = module.eks.engine_repository_url
}
