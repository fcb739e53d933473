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

variable "enable_cluster_creator_admin_permissions" {
  description = "Give the role running Terraform cluster-admin (the helm, kubernetes and llmplat providers of steps 2 and 3 act as it)."
  type        = bool
  default     = true
}

variable "cluster_admin_arns" {
  description = "IAM roles given cluster-admin beside the runner (operators, a break-glass role)."
  type        = list(string)
  default     = []
}

# The runner must reach the Kubernetes API: give one of the two shapes.
variable "public_api_endpoint_cidrs" {
  description = "A public API endpoint for these CIDRs: the runner's egress addresses (a laptop or CI outside the VPC)."
  type        = list(string)
  default     = []
}

variable "private_api_endpoint_cidrs" {
  description = "The private API endpoint for these CIDRs: a runner in the VPC or on a VPN, peered or Direct Connect network routed to it."
  type        = list(string)
  default     = []
}

variable "private_api_endpoint_security_group_ids" {
  description = "The private API endpoint for members of these security groups (a runner instance, a CI runner, a bastion)."
  type        = list(string)
  default     = []
}

# The llmplat provider (step 3) calls the gateway: the runner must reach it
# too, through the internal load balancer (a runner on the private network)
# or an internet-facing one that admits the runner's CIDR.
variable "gateway_internal" {
  description = "Keep the gateway's load balancer internal (reached over VPN or peering)."
  type        = bool
  default     = true
}

variable "gateway_client_cidrs" {
  description = "CIDRs allowed to reach the gateway on 443 (include the runner's)."
  type        = list(string)
  default     = ["10.0.0.0/8"]
}

variable "images" {
  description = "The engine, platform and device plugin images, each from the registry its publisher releases to. The engine defaults to vLLM copied into the module's engine repository, by engine_digest; the platform image to llmplat in this account's ECR (docs/deploy-eks.md copies the one, builds and pushes the other)."
  type = object({
    engine        = optional(string)
    platform      = optional(string)
    device_plugin = optional(string, "nvcr.io/nvidia/k8s-device-plugin:v0.17.0")
  })
  default = {}
}

variable "engine_digest" {
  description = "The digest (sha256:...) of vLLM's image copied into the module's engine repository (output engine_repository_url), as the copy printed it (docs/deploy-eks.md, step 1). Needed from step 3 on: rendering refuses an engine not pinned by digest."
  type        = string
  default     = ""

  validation {
    condition     = var.engine_digest == "" || can(regex("^sha256:[0-9a-f]{64}$", var.engine_digest))
    error_message = "engine_digest is sha256: followed by 64 lowercase hex digits, as the copy printed it."
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
