variable "region" {
  description = "The AWS region."
  type        = string
  default     = "eu-central-1"
}

variable "gateway_domain" {
  description = "The gateway's DNS name, for example llm.example.com."
  type        = string
}

variable "route53_zone_id" {
  description = "The hosted zone of gateway_domain (certificate validation and the gateway's record)."
  type        = string
  default     = null
}

variable "cluster_admin_arns" {
  description = "IAM roles given cluster-admin."
  type        = list(string)
  default     = []
}

variable "images" {
  description = "The engine, platform and device plugin images."
  type = object({
    engine        = string
    platform      = string
    device_plugin = string
  })
  default = {
    engine        = "vllm/vllm-openai:v0.10.1"
    platform      = "llmplat/llmplat:0.1.0"
    device_plugin = "nvidia/k8s-device-plugin:v0.17.0"
  }
}

variable "admin_token" {
  description = "The platform's bootstrap admin token (also the llmplat provider's)."
  type        = string
  sensitive   = true
}

variable "internal_token" {
  description = "The token between gateway and orchestrators."
  type        = string
  sensitive   = true
}
