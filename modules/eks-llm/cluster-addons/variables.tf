variable "cluster" {
  description = "The AWS layer's outputs this layer reads: module.eks (cluster_name, region, karpenter, database, redis, gateway, platform_description, alerts_topic_arn, storage_kms_key_arn)."
  type = object({
    cluster_name         = string
    region               = string
    vpc_id               = string
    karpenter            = map(string)
    database             = any
    redis                = any
    gateway              = any
    platform_description = any
    alerts_topic_arn     = string
    storage_kms_key_arn  = string
  })
}

variable "images" {
  description = "The images: the vLLM engine, the llmplat binary (gateway, orchestrator, modelsync) and NVIDIA's device plugin."
  type = object({
    engine        = string
    platform      = string
    device_plugin = string
  })
}

variable "replicas" {
  description = "Gateway and orchestrator replicas (two each at least: a rollout or a node's loss keeps one)."
  type = object({
    gateway      = optional(number, 3)
    orchestrator = optional(number, 2)
  })
  default = {}

  validation {
    condition     = var.replicas.gateway >= 2 && var.replicas.orchestrator >= 2
    error_message = "Run at least two gateway and two orchestrator replicas."
  }
}

variable "admin_token" {
  description = "The bootstrap admin token the gateway accepts (the llmplat provider's token). Keep it in a secret store; it lands in the llmplat Secret."
  type        = string
  sensitive   = true

  validation {
    condition     = length(var.admin_token) >= 32
    error_message = "admin_token must be at least 32 characters."
  }
}

variable "internal_token" {
  description = "The token the gateway and orchestrators use between themselves."
  type        = string
  sensitive   = true

  validation {
    condition     = length(var.internal_token) >= 32
    error_message = "internal_token must be at least 32 characters."
  }
}

variable "models" {
  description = "The models to serve: planner profile, GPUs per replica, batch, replica bounds, spot, warm hours, revision, prices and limits. Only the hot small model should allow spot (the reference workload: the 8B)."
  type = map(object({
    served_name                 = string
    revision                    = string
    gpus_per_replica            = number
    planned_streams_per_replica = number
    peak_streams                = number
    min_replicas                = number
    max_replicas                = number
    spot                        = optional(bool, false)
    warm = optional(object({
      timezone = string
      start    = string
      end      = string
    }))
    prompt_price_micro_per_mtok     = number
    completion_price_micro_per_mtok = number
    max_context_tokens              = number
    max_output_tokens               = number
  }))

  validation {
    condition     = length(var.models) > 0
    error_message = "Serve at least one model."
  }

  validation {
    condition     = alltrue([for m in var.models : m.min_replicas >= 0 && m.min_replicas <= m.max_replicas])
    error_message = "Each model needs 0 <= min_replicas <= max_replicas."
  }

  # A spot model's min_replicas run in a Deployment of their own, bound to
  # the on-demand pool (vllm-<name>-on-demand); KEDA scales the replicas
  # above that floor, spot first. So the floor survives any spot reclaim.
  validation {
    condition     = alltrue([for m in var.models : !m.spot || (m.min_replicas >= 2 && m.max_replicas > m.min_replicas)])
    error_message = "A model on spot needs min_replicas >= 2 and max_replicas above it: its min_replicas run on on-demand nodes only, so they survive a spot reclaim (the reference workload: 2 on-demand replicas of the hot model), and only the replicas above them may run on spot."
  }
}

variable "gpu" {
  description = "The GPU profile the planner sizes the engines for."
  type        = string
  default     = "L40S"
}

variable "chart_versions" {
  description = "The Helm charts' versions, pinned. Karpenter's (and karpenter-crd's) is the AWS layer's karpenter_version (cluster.karpenter.version), checked there against the cluster's Kubernetes minor; prometheus_operator_crds is the CRD chart that ships the CRDs of the operator kube_prometheus_stack runs (23.0.0: v0.85.0, as 77.0.0). Bump a CRD chart with its main chart."
  type = object({
    keda                         = optional(string, "2.17.2")
    kube_prometheus_stack        = optional(string, "77.0.0")
    prometheus_operator_crds     = optional(string, "23.0.0")
    dcgm_exporter                = optional(string, "4.1.1")
    aws_load_balancer_controller = optional(string, "1.13.0")
  })
  default = {}
}
