variable "name" {
  description = "The EKS cluster's name; also the prefix of every resource and the karpenter.sh/discovery tag's value."
  type        = string
  default     = "inference"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,30}[a-z0-9]$", var.name))
    error_message = "name must be 3 to 32 lower-case letters, digits and -, starting with a letter."
  }
}

variable "kubernetes_version" {
  description = "The cluster's Kubernetes minor: the control plane's, and through it the system node group's and the managed add-ons' (upgrades.tf). A minor the module knows (local.kubernetes_minors), which karpenter_version and the GPU nodes' AMI release (gpu_pool.ami_alias) support. Upgrade one minor at a time, as docs/deploy-eks.md's Upgrades section says: EKS cannot downgrade a control plane."
  type        = string
  default     = "1.35"

  validation {
    condition     = can(regex("^1\\.[0-9]+$", var.kubernetes_version))
    error_message = "kubernetes_version is major.minor, for example 1.35."
  }

  validation {
    condition     = contains(keys(local.kubernetes_minors), var.kubernetes_version)
    error_message = "kubernetes_version must be a minor whose Karpenter and GPU AMI support the module has checked: ${join(", ", sort(keys(local.kubernetes_minors)))} (local.kubernetes_minors in upgrades.tf; a new minor gets a row there)."
  }

  validation {
    condition     = !contains(keys(local.kubernetes_minors), var.kubernetes_version) || local.karpenter_version_number >= try(local.kubernetes_minors[var.kubernetes_version].karpenter, 0)
    error_message = "Karpenter ${var.karpenter_version} does not support Kubernetes ${var.kubernetes_version} (Karpenter's compatibility matrix): raise karpenter_version first (docs/deploy-eks.md, Upgrades)."
  }

  validation {
    condition     = !contains(keys(local.kubernetes_minors), var.kubernetes_version) || local.gpu_ami_release >= try(local.kubernetes_minors[var.kubernetes_version].ami_release, 0)
    error_message = "The GPU nodes' AMI ${local.gpu_ami_alias} has no Kubernetes ${var.kubernetes_version} build (the oldest release the module knows to carry one is v${try(local.kubernetes_minors[var.kubernetes_version].ami_release, "?")}): Karpenter could not launch a GPU node. Set gpu_pool.ami_alias to a release that has it, in the same apply."
  }
}

variable "kubernetes_support_type" {
  description = "The cluster's upgrade policy at the end of its minor's standard support: STANDARD (EKS upgrades the control plane itself then, so upgrade before that date: docs/deploy-eks.md, Upgrades) or EXTENDED (12 more months at the extended support price, about six times the standard control-plane hour)."
  type        = string
  default     = "STANDARD"

  validation {
    condition     = contains(["STANDARD", "EXTENDED"], var.kubernetes_support_type)
    error_message = "kubernetes_support_type is STANDARD or EXTENDED."
  }
}

variable "support_checked_at" {
  description = "The time (RFC 3339) a plan compares with the end of kubernetes_version's standard support; null, the plan's own time. The module's tests pin it, so that they do not change with the calendar."
  type        = string
  default     = null
}

variable "karpenter_version" {
  description = "Karpenter's version: the in-cluster layer installs its karpenter-crd and karpenter charts at it (the module's output karpenter.version), and kubernetes_version is checked against it. Raise it before kubernetes_version when the new minor needs it."
  type        = string
  default     = "1.10.0"

  validation {
    condition     = can(regex("^[0-9]+\\.[0-9]+\\.[0-9]+$", var.karpenter_version))
    error_message = "karpenter_version is an exact chart version, for example 1.10.0."
  }
}

variable "vpc_cidr" {
  description = "The CIDR of the VPC the module creates; ignored when vpc_id is given."
  type        = string
  default     = "10.40.0.0/16"

  validation {
    condition     = can(cidrhost(var.vpc_cidr, 0)) && tonumber(split("/", var.vpc_cidr)[1]) <= 20
    error_message = "vpc_cidr must be an IPv4 CIDR of /20 or larger (the pods take their addresses from it)."
  }
}

variable "vpc_id" {
  description = "An existing VPC to use instead of creating one; give private_subnet_ids (and public_subnet_ids for a public gateway) with it."
  type        = string
  default     = null
}

variable "private_subnet_ids" {
  description = "The existing VPC's private subnets (at least two zones): nodes, databases and an internal load balancer."
  type        = list(string)
  default     = []

  validation {
    condition     = length(var.private_subnet_ids) == 0 || length(var.private_subnet_ids) >= 2
    error_message = "Give at least two private subnets, in different zones."
  }
}

variable "private_route_table_ids" {
  description = "The existing VPC's private subnets' route tables: the module adds an S3 gateway endpoint to them, so model weights and image layers bypass the NAT gateway's per-GB charge. Leave empty when the VPC has an S3 gateway endpoint on them already."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for r in var.private_route_table_ids : can(regex("^rtb-[0-9a-f]+$", r))])
    error_message = "private_route_table_ids must be route table ids (rtb-...)."
  }
}

variable "public_subnet_ids" {
  description = "The existing VPC's public subnets, for an internet-facing gateway load balancer."
  type        = list(string)
  default     = []
}

variable "availability_zones" {
  description = "Zones of the created VPC's subnets; default the region's first three."
  type        = list(string)
  default     = []
}

variable "single_nat_gateway" {
  description = "One NAT gateway for the created VPC instead of one per zone (cheaper; a zone's outage cuts the others' egress)."
  type        = bool
  default     = true
}

variable "enable_cluster_creator_admin_permissions" {
  description = "Give the principal running Terraform cluster-admin through an access entry: the in-cluster layer's helm, kubernetes and llmplat providers act as it. An access entry, not the cluster's bootstrap flag, which AWS fixes at creation (changing that would replace the cluster)."
  type        = bool
  default     = true

  validation {
    condition     = var.enable_cluster_creator_admin_permissions || length(var.cluster_admin_arns) > 0
    error_message = "Nobody could administer the cluster: with enable_cluster_creator_admin_permissions = false, list the Terraform runner's role (and your operators') in cluster_admin_arns, or the in-cluster layer's providers and kubectl are refused."
  }
}

variable "cluster_admin_arns" {
  description = "IAM principals (roles or users) given cluster-admin through EKS access entries, beside the Terraform runner (enable_cluster_creator_admin_permissions)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.cluster_admin_arns : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/", a))])
    error_message = "cluster_admin_arns must be IAM role or user ARNs."
  }
}

# The Kubernetes API's ways in. The Terraform runner (its helm, kubernetes
# and llmplat providers) and kubectl must reach it: through the public
# endpoint from given CIDRs, or through the private endpoint from given
# CIDRs or security groups (a runner in the VPC, or on a network routed to
# it). A private endpoint nobody may reach is refused.
variable "public_api_endpoint_cidrs" {
  description = "CIDRs allowed to reach the Kubernetes API's public endpoint (the runner's egress addresses); empty keeps the endpoint private only."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.public_api_endpoint_cidrs : can(cidrhost(c, 0)) && !strcontains(c, ":")])
    error_message = "public_api_endpoint_cidrs must be IPv4 CIDRs."
  }

  validation {
    condition     = length(var.public_api_endpoint_cidrs) + length(var.private_api_endpoint_cidrs) + length(var.private_api_endpoint_security_group_ids) > 0
    error_message = "The Kubernetes API would be private with no way in: give public_api_endpoint_cidrs (a public endpoint for the runner's egress addresses), or private_api_endpoint_cidrs or private_api_endpoint_security_group_ids (the private endpoint, for a runner in the VPC or on a network routed to it)."
  }
}

variable "private_api_endpoint_cidrs" {
  description = "CIDRs admitted to the Kubernetes API's private endpoint on 443: a runner in the VPC, or on a VPN, peered or Direct Connect network routed to it."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.private_api_endpoint_cidrs : can(cidrhost(c, 0)) && !strcontains(c, ":")])
    error_message = "private_api_endpoint_cidrs must be IPv4 CIDRs."
  }
}

variable "private_api_endpoint_security_group_ids" {
  description = "Security groups whose members are admitted to the Kubernetes API's private endpoint on 443: a runner instance's, a CI runner's or a bastion's group."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for g in var.private_api_endpoint_security_group_ids : can(regex("^sg-[0-9a-f]+$", g))])
    error_message = "private_api_endpoint_security_group_ids must be security group ids (sg-...)."
  }
}

variable "system_instance_types" {
  description = "The system node group's instance types: gateway, orchestrator, KEDA, Karpenter and Prometheus run there (the reference deployment: m6i)."
  type        = list(string)
  default     = ["m6i.xlarge"]

  validation {
    condition     = length(var.system_instance_types) > 0 && alltrue([for t in var.system_instance_types : can(regex("^m6i\\.", t))])
    error_message = "The system node group runs on m6i instance types (the reference deployment's system pool)."
  }
}

variable "system_nodes" {
  description = "The system node group's size."
  type = object({
    min     = number
    desired = number
    max     = number
  })
  default = { min = 3, desired = 3, max = 6 }

  validation {
    condition     = var.system_nodes.min >= 2 && var.system_nodes.min <= var.system_nodes.desired && var.system_nodes.desired <= var.system_nodes.max
    error_message = "system_nodes needs 2 <= min <= desired <= max: the gateway and orchestrator keep two replicas each."
  }
}

variable "gpu_pool" {
  description = "The Karpenter GPU NodePools (gpu-<gpu> on demand and gpu-<gpu>-spot): the GPU's name, the instance family, the bound on each pool's nvidia.com/gpu, so a runaway scale-up cannot buy a hundred GPUs, and the AL2023 AMI release the nodes run (ami_alias, al2023@vYYYYMMDD; unset: the release `llmplat render` pins). Each pool is capped at what its models may run on it, counting the GPUs of the nodes (every model at max_replicas on demand, a spot model's replicas above its floor on spot, each replica on its own smallest node: llmplat plan shows them); gpu_limit must hold both (rendering refuses less): 40 for the example's models (8 x 1 + 5 x 4 + 3 x 4 on demand, a TP-2 or TP-4 replica buying a 4-GPU g6e.12xlarge; (8 - 2) x 1 = 6 on spot). Bump ami_alias after a staging cluster ran the new release: the pools replace their nodes one at a time."
  type = object({
    gpu       = string
    family    = string
    gpu_limit = number
    ami_alias = optional(string)
  })
  default = { gpu = "l40s", family = "g6e", gpu_limit = 40 }

  validation {
    condition     = can(regex("^[a-z0-9]+$", var.gpu_pool.gpu)) && can(regex("^(g|p)[0-9][a-z]*$", var.gpu_pool.family))
    error_message = "gpu_pool.gpu is a lower-case name (l40s); gpu_pool.family an EC2 GPU family (g6e)."
  }

  validation {
    condition     = var.gpu_pool.gpu_limit >= 1 && var.gpu_pool.gpu_limit <= 64
    error_message = "gpu_pool.gpu_limit must be between 1 and 64."
  }

  validation {
    condition     = var.gpu_pool.ami_alias == null || can(regex("^al2023@v[0-9]{8}$", var.gpu_pool.ami_alias))
    error_message = "gpu_pool.ami_alias must pin an AL2023 release (al2023@vYYYYMMDD): with @latest every new AMI replaces every GPU node."
  }
}

variable "namespace" {
  description = "The platform's namespace: the modelsync role is bound to its vllm service account."
  type        = string
  default     = "llmplat"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.namespace))
    error_message = "namespace must be a Kubernetes name."
  }
}

variable "database" {
  description = "Aurora PostgreSQL Serverless v2: capacity in ACUs, instances (writer plus readers), the engine's major version (RDS applies minor versions itself in the maintenance window: a pinned minor would make the next plan ask for a downgrade RDS refuses), and deletion protection (switch it off only to tear a test platform down)."
  type = object({
    engine_version      = optional(string, "15")
    min_acu             = optional(number, 0.5)
    max_acu             = optional(number, 16)
    instances           = optional(number, 2)
    deletion_protection = optional(bool, true)
    backup_days         = optional(number, 14)
  })
  default = {}

  validation {
    condition     = var.database.min_acu >= 0 && var.database.min_acu <= var.database.max_acu && var.database.max_acu <= 256
    error_message = "database needs 0 <= min_acu <= max_acu <= 256."
  }

  validation {
    condition     = var.database.instances >= 1 && var.database.instances <= 15
    error_message = "database.instances must be between 1 and 15."
  }

  validation {
    condition     = can(regex("^[0-9]+$", var.database.engine_version))
    error_message = "database.engine_version is a major version (15): RDS upgrades the minor itself, and a pinned minor (15.10) would make the next plan ask for a downgrade that fails."
  }
}

variable "redis" {
  description = "ElastiCache Redis: node type and engine version; a primary and a replica in two zones with automatic failover."
  type = object({
    node_type      = optional(string, "cache.r7g.large")
    engine_version = optional(string, "7.1")
    nodes          = optional(number, 2)
  })
  default = {}

  validation {
    condition     = var.redis.nodes >= 2 && var.redis.nodes <= 6
    error_message = "redis.nodes must be 2 to 6: multi-AZ failover needs a replica."
  }
}

variable "model_bucket_name" {
  description = "The S3 bucket of model weights (s3://<bucket>/<model>/<revision>/); default <name>-models-<account id>."
  type        = string
  default     = null

  validation {
    condition     = var.model_bucket_name == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.model_bucket_name))
    error_message = "model_bucket_name must be a valid S3 bucket name."
  }
}

variable "gateway_domain" {
  description = "The gateway's DNS name (for example llm.example.com): the ACM certificate's name, and the record created when route53_zone_id is given."
  type        = string

  validation {
    condition     = can(regex("^([a-z0-9]([-a-z0-9]*[a-z0-9])?\\.)+[a-z]{2,}$", var.gateway_domain))
    error_message = "gateway_domain must be a DNS name."
  }
}

variable "route53_zone_id" {
  description = "A Route 53 hosted zone of gateway_domain: the certificate is validated and the name pointed at the load balancer there. Without it, create the validation records (the output certificate_validations) at your DNS provider while the apply waits (certificate_validation_timeout)."
  type        = string
  default     = null
}

variable "certificate_validation_timeout" {
  description = "How long an apply waits for ACM to issue the gateway's certificate before the load balancer's listeners are created: without route53_zone_id, the time you have to create the validation records at your DNS provider."
  type        = string
  default     = "75m"

  validation {
    condition     = can(regex("^[0-9]+(m|h)$", var.certificate_validation_timeout))
    error_message = "certificate_validation_timeout is minutes or hours: 75m, 2h."
  }
}

variable "gateway_internal" {
  description = "Put the gateway's load balancer in the private subnets only (a company-internal platform reached over VPN or peering)."
  type        = bool
  default     = true
}

variable "gateway_proxy_protocol" {
  description = "Have the load balancer open each connection to a gateway pod with a PROXY protocol v2 header naming the client, which the gateway reads (-proxy-protocol-from, the load balancer's subnets): the console's sign-in limits then count per client, not per load balancer address. Upgrading a running platform, apply once with false (the gateways roll out reading the header where there is one), then with true."
  type        = bool
  default     = true
}

variable "gateway_client_cidrs" {
  description = "CIDRs allowed to reach the gateway on 443."
  type        = list(string)
  default     = ["10.0.0.0/8"]

  validation {
    condition     = length(var.gateway_client_cidrs) > 0 && alltrue([for c in var.gateway_client_cidrs : can(cidrhost(c, 0))])
    error_message = "gateway_client_cidrs must be one or more CIDRs."
  }
}

variable "tags" {
  description = "Tags on every resource."
  type        = map(string)
  default     = {}
}

variable "node_client_cidrs" {
  description = "CIDRs the on-premises node agents dial out from (their NAT's addresses, or the VPN's range): they reach the orchestrators' node socket on 8443 (TLS)."
  type        = list(string)
  default     = ["10.0.0.0/8"]

  validation {
    condition     = length(var.node_client_cidrs) > 0 && alltrue([for c in var.node_client_cidrs : can(cidrhost(c, 0))])
    error_message = "node_client_cidrs must be one or more CIDRs."
  }
}

variable "create_spot_service_linked_role" {
  description = "Create the account's EC2 Spot service-linked role (AWSServiceRoleForEC2Spot), without which no spot node launches. Set false when the account already has it (creating it again fails); `aws iam get-role --role-name AWSServiceRoleForEC2Spot` tells."
  type        = bool
  default     = true
}

variable "alert_emails" {
  description = "Addresses subscribed to the alerts' SNS topic (each confirms by mail). Other subscribers (a pager, a chat hook) can subscribe to the topic, the output alerts_topic_arn."
  type        = list(string)
  default     = []
}
