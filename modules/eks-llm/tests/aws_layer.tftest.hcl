# The AWS layer's properties that matter, checked offline against a mocked
# aws provider: `terraform test` in modules/eks-llm (make test runs it).

mock_provider "aws" {
  source = "./tests/aws"
}

variables {
  gateway_domain = "llm.example.com"
  # The runner inside the VPC's address range: the private endpoint's way in.
  private_api_endpoint_cidrs = ["10.0.0.0/8"]
  # The support check's time, pinned: the default minor is in standard
  # support then, and the suite does not change with the calendar.
  support_checked_at = "2026-12-07T00:00:00Z"
}

run "gpu_pools_are_the_reference_workloads" {
  command = plan

  assert {
    condition     = output.platform_description.gpu_pool.family == "g6e"
    error_message = "The GPU NodePools must use the g6e family (L40S) only."
  }
  assert {
    condition     = output.platform_description.gpu_pool.gpu_limit == 40
    error_message = "The GPU NodePools must be limited to 40 nvidia.com/gpu each: the example's models at max_replicas on their nodes."
  }
  assert {
    condition     = output.platform_description.gpu_pool.gpu == "l40s"
    error_message = "The GPU pools are gpu-l40s and gpu-l40s-spot."
  }
  assert {
    condition     = output.platform_description.cluster == "inference" && aws_eks_cluster.this.name == "inference"
    error_message = "The cluster is called inference."
  }
  assert {
    condition     = output.platform_description.node_role == aws_iam_role.karpenter_node.name
    error_message = "The EC2NodeClass's role is the Karpenter node role."
  }
}

run "system_nodes_are_m6i_on_al2023" {
  command = plan

  assert {
    condition     = alltrue([for t in aws_eks_node_group.system.instance_types : startswith(t, "m6i.")])
    error_message = "The system node group runs on m6i."
  }
  assert {
    condition     = aws_eks_node_group.system.ami_type == "AL2023_x86_64_STANDARD" && aws_eks_node_group.system.capacity_type == "ON_DEMAND"
    error_message = "The system node group is on-demand AL2023."
  }
  assert {
    condition     = toset(keys(aws_eks_addon.this)) == toset(["vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"])
    error_message = "The add-ons are vpc-cni, kube-proxy, coredns and the pod identity agent."
  }
  assert {
    condition     = aws_eks_cluster.this.access_config[0].authentication_mode == "API"
    error_message = "Cluster access is by access entries."
  }
}

# Issue 43, item 6: a kubernetes_version bump moved the control plane only.
# The system node group and the managed add-ons follow the cluster's minor
# (the add-ons at AWS's default version for it), and the upgrade policy is
# stated. 1.34 is past its standard support: the check says so.
run "node_group_and_addons_follow_the_cluster" {
  command = plan

  variables {
    kubernetes_version = "1.34"
  }

  assert {
    condition     = aws_eks_cluster.this.version == "1.34" && aws_eks_node_group.system.version == aws_eks_cluster.this.version
    error_message = "The system node group must run the cluster's Kubernetes minor."
  }
  assert {
    condition = alltrue([for k, a in aws_eks_addon.this :
      data.aws_eks_addon_version.this[k].kubernetes_version == "1.34" && a.addon_version == data.aws_eks_addon_version.this[k].version
    ])
    error_message = "Each add-on must be at its version for the cluster's Kubernetes minor."
  }
  assert {
    condition     = aws_eks_cluster.this.upgrade_policy[0].support_type == "STANDARD"
    error_message = "The upgrade policy is stated: standard support unless EXTENDED is chosen."
  }

  expect_failures = [check.kubernetes_version_in_standard_support]
}

run "warns_past_the_minors_standard_support" {
  command = plan

  variables {
    support_checked_at = "2027-03-27T00:00:00Z"
  }

  expect_failures = [check.kubernetes_version_in_standard_support]
}

run "extended_support_is_chosen" {
  command = plan

  variables {
    kubernetes_support_type = "EXTENDED"
  }

  assert {
    condition     = aws_eks_cluster.this.upgrade_policy[0].support_type == "EXTENDED"
    error_message = "kubernetes_support_type sets the cluster's upgrade policy."
  }
}

# The GPU nodes follow the cluster through Karpenter and their AMI
# release: a minor either cannot serve would leave the GPU pools unable
# to launch a node, so the plan refuses it.
run "refuses_a_minor_the_gpu_ami_has_no_build_for" {
  command = plan

  variables {
    kubernetes_version = "1.35"
    gpu_pool           = { gpu = "l40s", family = "g6e", gpu_limit = 40, ami_alias = "al2023@v20251120" }
  }

  expect_failures = [var.kubernetes_version]
}

run "refuses_a_minor_karpenter_does_not_support" {
  command = plan

  variables {
    kubernetes_version = "1.35"
    karpenter_version  = "1.8.2"
  }

  expect_failures = [var.kubernetes_version]
}

run "refuses_a_minor_nothing_was_checked_for" {
  command = plan

  variables {
    kubernetes_version = "1.36"
  }

  expect_failures = [var.kubernetes_version]
}

run "an_older_minor_with_its_ami_and_karpenter" {
  command = plan

  variables {
    kubernetes_version = "1.34"
    karpenter_version  = "1.6.3"
    gpu_pool           = { gpu = "l40s", family = "g6e", gpu_limit = 40, ami_alias = "al2023@v20251120" }
  }

  assert {
    condition     = aws_eks_node_group.system.version == "1.34" && output.karpenter.version == "1.6.3"
    error_message = "A supported pair plans, and the in-cluster layer gets the checked Karpenter version."
  }

  expect_failures = [check.kubernetes_version_in_standard_support]
}

run "every_data_store_is_encrypted" {
  command = plan

  assert {
    condition     = aws_rds_cluster.this.storage_encrypted && aws_rds_cluster.this.manage_master_user_password
    error_message = "Aurora must be encrypted at rest, its password managed by Secrets Manager."
  }
  assert {
    condition     = aws_elasticache_replication_group.this.at_rest_encryption_enabled && aws_elasticache_replication_group.this.transit_encryption_enabled && aws_elasticache_replication_group.this.transit_encryption_mode == "required"
    error_message = "ElastiCache must be encrypted at rest and in transit (TLS required)."
  }
  assert {
    condition     = aws_elasticache_replication_group.this.multi_az_enabled && aws_elasticache_replication_group.this.automatic_failover_enabled && aws_elasticache_replication_group.this.num_cache_clusters >= 2
    error_message = "ElastiCache must be multi-AZ with failover."
  }
  assert {
    condition     = one([for r in aws_s3_bucket_server_side_encryption_configuration.models.rule : one(r.apply_server_side_encryption_by_default).sse_algorithm]) == "aws:kms"
    error_message = "The model bucket must be encrypted with KMS."
  }
  assert {
    condition     = contains(aws_eks_cluster.this.encryption_config[0].resources, "secrets")
    error_message = "The cluster's Secrets must be encrypted with the module's key."
  }
  assert {
    condition     = aws_sqs_queue.karpenter_interruption.sqs_managed_sse_enabled && aws_kms_key.data.enable_key_rotation
    error_message = "The queue is encrypted and the key rotates."
  }
  assert {
    condition     = aws_rds_cluster.this.deletion_protection
    error_message = "Deletion protection is on by default."
  }
}

run "no_data_store_is_public" {
  command = plan

  assert {
    condition     = alltrue([for i in aws_rds_cluster_instance.this : !i.publicly_accessible])
    error_message = "No Aurora instance may be publicly accessible."
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.database_from_cluster.cidr_ipv4 == null && aws_vpc_security_group_ingress_rule.database_from_cluster.from_port == 5432
    error_message = "The database admits the cluster's security group only, on 5432."
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.redis_from_cluster.cidr_ipv4 == null && aws_vpc_security_group_ingress_rule.redis_from_cluster.from_port == 6379
    error_message = "Redis admits the cluster's security group only, on 6379."
  }
  assert {
    condition = (aws_s3_bucket_public_access_block.models.block_public_acls && aws_s3_bucket_public_access_block.models.block_public_policy
    && aws_s3_bucket_public_access_block.models.ignore_public_acls && aws_s3_bucket_public_access_block.models.restrict_public_buckets)
    error_message = "The model bucket must block every kind of public access."
  }
  assert {
    condition     = aws_s3_bucket_versioning.models.versioning_configuration[0].status == "Enabled"
    error_message = "The model bucket is versioned."
  }
  assert {
    condition     = aws_eks_cluster.this.vpc_config[0].endpoint_public_access == false
    error_message = "The Kubernetes API is private unless CIDRs are given."
  }
  assert {
    condition     = aws_lb.gateway.internal && aws_lb_listener.gateway_tls.protocol == "TLS" && aws_lb_listener.gateway_tls.port == 443
    error_message = "The gateway is reached by TLS on 443, internal by default."
  }
  assert {
    condition     = aws_lb_listener.nodes_tls.protocol == "TLS" && aws_lb_listener.nodes_tls.port == 8443 && aws_lb_target_group.nodes.port == 8090
    error_message = "On-premises agents reach the orchestrators' node socket by TLS on 8443."
  }
}

run "interruption_queue_reaches_karpenter" {
  command = apply

  assert {
    condition     = alltrue([for t in aws_cloudwatch_event_target.karpenter_interruption : t.arn == aws_sqs_queue.karpenter_interruption.arn])
    error_message = "Every interruption rule must deliver to the queue."
  }
  assert {
    condition     = contains([for r in aws_cloudwatch_event_rule.karpenter_interruption : jsondecode(r.event_pattern)["detail-type"][0]], "EC2 Spot Instance Interruption Warning")
    error_message = "Spot interruption warnings must reach the queue."
  }
  assert {
    condition     = one([for s in jsondecode(aws_iam_role_policy.karpenter.policy).Statement : s.Resource if s.Sid == "Interruptions"]) == aws_sqs_queue.karpenter_interruption.arn
    error_message = "Karpenter's role must read the interruption queue."
  }
  assert {
    condition     = output.karpenter.interruption_queue == aws_sqs_queue.karpenter_interruption.name
    error_message = "The queue's name is an output, for Karpenter's settings.interruptionQueue."
  }
  assert {
    condition     = aws_eks_pod_identity_association.karpenter.service_account == "karpenter" && aws_eks_pod_identity_association.karpenter.role_arn == aws_iam_role.karpenter.arn
    error_message = "Karpenter's service account takes its role by Pod Identity."
  }
}

run "modelsync_reads_only" {
  command = apply

  assert {
    condition     = toset(flatten([for s in jsondecode(aws_iam_role_policy.modelsync.policy).Statement : s.Action])) == toset(["s3:ListBucket", "s3:GetObject", "kms:Decrypt"])
    error_message = "modelsync's role may list and read the bucket and decrypt, nothing else."
  }
  assert {
    condition     = aws_eks_pod_identity_association.modelsync.namespace == "llmplat" && aws_eks_pod_identity_association.modelsync.service_account == "vllm"
    error_message = "The model pods' service account takes the read role."
  }
  assert {
    condition     = output.database.secret_arn != "" && output.redis.secret_arn == aws_secretsmanager_secret.redis.arn
    error_message = "The database's and Redis's secrets are outputs."
  }
}

# The password-rotation design (issue 30, item 7): RDS rotates the master
# password in Secrets Manager; the gateway's and the orchestrator's pods
# read it there themselves, with a Pod Identity role that may read that one
# secret and decrypt it with the module's key through Secrets Manager only.
# (That the in-cluster layer's Secret carries the ARN and no password is
# checked in the HCL by eksllm_test.go: that layer needs providers not
# installable here.)
run "pods_read_the_rotated_database_password" {
  command = apply

  assert {
    condition     = aws_rds_cluster.this.manage_master_user_password && !aws_rds_cluster.this.iam_database_authentication_enabled && aws_rds_cluster.this.master_user_secret_kms_key_id == aws_kms_key.data.arn
    error_message = "RDS manages (and rotates) the master password in Secrets Manager, encrypted with the module's key."
  }
  assert {
    condition     = length(jsondecode(aws_iam_role_policy.platform_database_secret.policy).Statement) == 2 && aws_iam_role_policy.platform_database_secret.role == aws_iam_role.platform.id
    error_message = "The platform role has exactly two statements: read the secret, decrypt it."
  }
  assert {
    condition = one([for s in jsondecode(aws_iam_role_policy.platform_database_secret.policy).Statement : s if s.Action == ["secretsmanager:GetSecretValue"]
    ]).Resource == "arn:aws:secretsmanager:eu-central-1:123456789012:secret:rds-ledger"
    error_message = "The platform role may read exactly the database's managed secret."
  }
  assert {
    condition = alltrue([for s in jsondecode(aws_iam_role_policy.platform_database_secret.policy).Statement :
      s.Effect == "Allow" && s.Resource != "*" && (s.Action == ["secretsmanager:GetSecretValue"] || (s.Action == ["kms:Decrypt"]
        && s.Resource == aws_kms_key.data.arn
    && try(s.Condition.StringEquals["kms:ViaService"], "") == "secretsmanager.eu-central-1.amazonaws.com"))])
    error_message = "The platform role may decrypt with the module's key only through Secrets Manager, and do nothing else."
  }
  assert {
    condition     = jsondecode(aws_iam_role.platform.assume_role_policy).Statement[0].Principal.Service == "pods.eks.amazonaws.com"
    error_message = "Pods take the platform role by EKS Pod Identity."
  }
  assert {
    condition = (toset(keys(aws_eks_pod_identity_association.platform)) == toset(["llmplat-gateway", "llmplat-orchestrator"])
      && alltrue([for sa, a in aws_eks_pod_identity_association.platform : a.service_account == sa && a.namespace == "llmplat"
    && a.role_arn == aws_iam_role.platform.arn]) && aws_iam_role.platform.name == "inference-platform")
    error_message = "The gateway's and the orchestrator's service accounts take the platform role."
  }
  assert {
    condition = (output.database.secret_arn == aws_rds_cluster.this.master_user_secret[0].secret_arn
      && output.database.username == "llmplat"
    && output.platform_role_arn == aws_iam_role.platform.arn)
    error_message = "The in-cluster layer gets the secret's ARN and the user, never the password, and the platform role."
  }
  assert {
    condition     = !anytrue([for s in jsondecode(aws_iam_role_policy.modelsync.policy).Statement : contains(s.Action, "secretsmanager:GetSecretValue")])
    error_message = "The model pods' role must not read the database password."
  }
}

# Model weights and image layers reach S3 through a gateway endpoint on
# every private route table, never through the NAT gateway (billed per GB:
# a 70B cold start is 65.8 GiB).
run "s3_bypasses_the_nat_gateway" {
  command = apply

  assert {
    condition     = length(aws_vpc_endpoint.s3) == 1 && aws_vpc_endpoint.s3[0].vpc_endpoint_type == "Gateway" && aws_vpc_endpoint.s3[0].service_name == "com.amazonaws.eu-central-1.s3"
    error_message = "The VPC needs an S3 gateway endpoint in the cluster's region."
  }
  assert {
    condition     = aws_vpc_endpoint.s3[0].vpc_id == aws_vpc.this[0].id
    error_message = "The S3 endpoint belongs to the cluster's VPC."
  }
  assert {
    condition     = length(aws_route_table.private) == 3 && toset(aws_vpc_endpoint.s3[0].route_table_ids) == toset(aws_route_table.private[*].id)
    error_message = "The S3 endpoint must be on every private route table, the nodes' (and on no other)."
  }
}

run "given_vpc_route_tables_get_the_s3_endpoint" {
  command = plan

  variables {
    vpc_id                  = "vpc-0123456789abcdef0"
    private_subnet_ids      = ["subnet-a", "subnet-b", "subnet-c"]
    private_route_table_ids = ["rtb-0a", "rtb-0b"]
  }

  assert {
    condition     = aws_vpc_endpoint.s3[0].vpc_id == "vpc-0123456789abcdef0" && toset(aws_vpc_endpoint.s3[0].route_table_ids) == toset(["rtb-0a", "rtb-0b"])
    error_message = "A given VPC's named private route tables get the S3 gateway endpoint."
  }
}

run "given_vpc" {
  command = plan

  variables {
    vpc_id             = "vpc-0123456789abcdef0"
    private_subnet_ids = ["subnet-a", "subnet-b", "subnet-c"]
  }

  assert {
    condition     = length(aws_vpc.this) == 0 && length(aws_nat_gateway.this) == 0
    error_message = "A given VPC is used, not a new one."
  }
  assert {
    condition     = length(aws_vpc_endpoint.s3) == 0
    error_message = "A given VPC without private_route_table_ids keeps its own S3 endpoint: a route table takes one."
  }
  assert {
    condition     = toset(keys(aws_ec2_tag.given_subnet_discovery)) == toset(["subnet-a", "subnet-b", "subnet-c"])
    error_message = "Given subnets get Karpenter's discovery tag."
  }
  assert {
    condition     = jsonencode(output.platform_description.gateway.proxy_protocol_from) == jsonencode(["10.1.0.0/20", "10.1.0.0/20", "10.1.0.0/20"])
    error_message = "The gateway reads PROXY headers from the given subnets the load balancer is in, by their ranges."
  }
}

# The console counts failed sign-ins per client: behind the NLB's TLS
# listeners a pod sees only the load balancer's addresses, so the gateway's
# target group sends a PROXY protocol v2 header naming the client, and the
# gateway believes one only from the load balancer's subnets.
run "gateway_learns_the_client_address" {
  command = plan

  assert {
    condition     = aws_lb_target_group.gateway.proxy_protocol_v2 == true
    error_message = "The gateway's target group must send PROXY protocol v2 headers."
  }
  assert {
    condition     = coalesce(aws_lb_target_group.nodes.proxy_protocol_v2, false) == false
    error_message = "The node socket's target group sends no PROXY header: the orchestrator reads none."
  }
  assert {
    condition     = jsonencode(output.platform_description.gateway.proxy_protocol_from) == jsonencode(["10.40.0.0/18", "10.40.64.0/18", "10.40.128.0/18"])
    error_message = "An internal load balancer is in the private subnets: the gateway reads PROXY headers from their ranges alone."
  }
}

run "internet_facing_gateway_trusts_the_public_subnets" {
  command = plan

  variables {
    gateway_internal = false
  }

  assert {
    condition     = jsonencode(output.platform_description.gateway.proxy_protocol_from) == jsonencode(["10.40.192.0/22", "10.40.196.0/22", "10.40.200.0/22"])
    error_message = "An internet-facing load balancer is in the public subnets: the gateway reads PROXY headers from their ranges alone."
  }
}

run "gateway_proxy_protocol_can_wait_for_the_gateways" {
  command = plan

  variables {
    gateway_proxy_protocol = false
  }

  assert {
    condition     = aws_lb_target_group.gateway.proxy_protocol_v2 == false && length(output.platform_description.gateway.proxy_protocol_from) == 3
    error_message = "With gateway_proxy_protocol = false the target group sends no header, while the gateways already read one from the load balancer's subnets (the first step of an upgrade)."
  }
}

run "refuses_gpu_system_nodes" {
  command = plan

  variables {
    system_instance_types = ["g6e.xlarge"]
  }

  expect_failures = [var.system_instance_types]
}

run "refuses_an_unbounded_gpu_pool" {
  command = plan

  variables {
    gpu_pool = { gpu = "l40s", family = "g6e", gpu_limit = 0 }
  }

  expect_failures = [var.gpu_pool]
}

# Karpenter advises against @latest in production: any new AMI would
# replace every GPU node at once (issue 30).
run "refuses_an_unpinned_ami" {
  command = plan

  variables {
    gpu_pool = { gpu = "l40s", family = "g6e", gpu_limit = 16, ami_alias = "al2023@latest" }
  }

  expect_failures = [var.gpu_pool]
}

run "refuses_a_floor_above_the_cap" {
  command = plan

  variables {
    database = { min_acu = 8, max_acu = 2 }
  }

  expect_failures = [var.database]
}

# Issue 43, item 7: with a pinned minor (15.10) and RDS's automatic minor
# upgrades, the plan after an upgrade asked to go back to 15.10, which RDS
# refuses. The module tracks the major only, and refuses a minor.
run "refuses_a_pinned_database_minor" {
  command = plan

  variables {
    database = { engine_version = "15.10" }
  }

  expect_failures = [var.database]
}

run "database_tracks_its_major_and_takes_minor_upgrades" {
  command = plan

  variables {
    database = { engine_version = "16" }
  }

  assert {
    condition     = aws_rds_cluster.this.engine_version == "16" && alltrue([for i in aws_rds_cluster_instance.this : i.engine_version == "16" && i.auto_minor_version_upgrade])
    error_message = "The cluster and its instances ask for the major only and take RDS's minor upgrades."
  }
  assert {
    condition     = aws_rds_cluster.this.allow_major_version_upgrade
    error_message = "Raising database.engine_version upgrades the major: RDS refuses that without allow_major_version_upgrade."
  }
}

run "refuses_a_bad_domain" {
  command = plan

  variables {
    gateway_domain = "not a domain"
  }

  expect_failures = [var.gateway_domain]
}

# The Terraform runner administers the cluster: the in-cluster layer's
# providers act as it (issue 30: without this the second step was refused).
run "runner_administers_the_cluster" {
  command = plan

  assert {
    condition     = aws_eks_access_entry.admin["arn:aws:iam::123456789012:role/terraform-runner"].type == "STANDARD"
    error_message = "The role running Terraform (the session's issuer, not the session) must get an access entry."
  }
  assert {
    condition = (endswith(aws_eks_access_policy_association.admin["arn:aws:iam::123456789012:role/terraform-runner"].policy_arn, "/AmazonEKSClusterAdminPolicy")
    && aws_eks_access_policy_association.admin["arn:aws:iam::123456789012:role/terraform-runner"].access_scope[0].type == "cluster")
    error_message = "The runner must be cluster-admin over the whole cluster."
  }
  assert {
    condition     = toset(keys(aws_eks_access_entry.admin)) == toset(["arn:aws:iam::123456789012:role/terraform-runner"])
    error_message = "Without cluster_admin_arns, the runner alone administers the cluster."
  }
}

run "named_admins_without_the_runner" {
  command = plan

  variables {
    enable_cluster_creator_admin_permissions = false
    cluster_admin_arns                       = ["arn:aws:iam::123456789012:role/platform-admin"]
  }

  assert {
    condition     = toset(keys(aws_eks_access_policy_association.admin)) == toset(["arn:aws:iam::123456789012:role/platform-admin"])
    error_message = "With the runner's entry off, exactly cluster_admin_arns administer the cluster."
  }
}

run "refuses_a_cluster_nobody_administers" {
  command = plan

  variables {
    enable_cluster_creator_admin_permissions = false
    cluster_admin_arns                       = []
  }

  expect_failures = [var.enable_cluster_creator_admin_permissions]
}

# The private endpoint with a way in: the control plane's own security
# group admits the given CIDRs and groups on 443.
run "private_endpoint_admits_the_runner" {
  command = apply

  variables {
    private_api_endpoint_cidrs              = ["10.20.0.0/16"]
    private_api_endpoint_security_group_ids = ["sg-0123456789abcdef0"]
  }

  assert {
    condition     = !aws_eks_cluster.this.vpc_config[0].endpoint_public_access && aws_eks_cluster.this.vpc_config[0].endpoint_private_access
    error_message = "Without public CIDRs the endpoint is private only."
  }
  assert {
    condition = (aws_vpc_security_group_ingress_rule.api_from_cidrs["10.20.0.0/16"].cidr_ipv4 == "10.20.0.0/16"
      && aws_vpc_security_group_ingress_rule.api_from_cidrs["10.20.0.0/16"].from_port == 443
      && aws_vpc_security_group_ingress_rule.api_from_cidrs["10.20.0.0/16"].to_port == 443
    && aws_vpc_security_group_ingress_rule.api_from_cidrs["10.20.0.0/16"].security_group_id == aws_security_group.api.id)
    error_message = "The API's security group must admit the runner's CIDR on 443."
  }
  assert {
    condition = (aws_vpc_security_group_ingress_rule.api_from_security_groups["sg-0123456789abcdef0"].referenced_security_group_id == "sg-0123456789abcdef0"
      && aws_vpc_security_group_ingress_rule.api_from_security_groups["sg-0123456789abcdef0"].from_port == 443
    && aws_vpc_security_group_ingress_rule.api_from_security_groups["sg-0123456789abcdef0"].security_group_id == aws_security_group.api.id)
    error_message = "The API's security group must admit the runner's security group on 443."
  }
  assert {
    condition     = contains(aws_eks_cluster.this.vpc_config[0].security_group_ids, aws_security_group.api.id)
    error_message = "The API's security group must be on the control plane's interfaces."
  }
  assert {
    condition     = length(aws_vpc_security_group_ingress_rule.api_from_cidrs) == 1 && length(aws_vpc_security_group_ingress_rule.api_from_security_groups) == 1
    error_message = "The API admits exactly the given CIDRs and groups."
  }
}

run "public_endpoint_for_given_cidrs" {
  command = plan

  variables {
    public_api_endpoint_cidrs  = ["203.0.113.0/24", "198.51.100.7/32"]
    private_api_endpoint_cidrs = []
  }

  assert {
    condition     = aws_eks_cluster.this.vpc_config[0].endpoint_public_access && toset(aws_eks_cluster.this.vpc_config[0].public_access_cidrs) == toset(["203.0.113.0/24", "198.51.100.7/32"])
    error_message = "The public endpoint admits exactly the given CIDRs."
  }
  assert {
    condition     = length(aws_vpc_security_group_ingress_rule.api_from_cidrs) == 0 && length(aws_vpc_security_group_ingress_rule.api_from_security_groups) == 0
    error_message = "The public shape opens nothing on the private endpoint."
  }
}

run "refuses_a_private_endpoint_with_no_way_in" {
  command = plan

  variables {
    public_api_endpoint_cidrs               = []
    private_api_endpoint_cidrs              = []
    private_api_endpoint_security_group_ids = []
  }

  expect_failures = [var.public_api_endpoint_cidrs]
}

# The listeners wait for issuance whatever serves the DNS: without Route 53
# the validation still exists (it waits for ISSUED) and the listeners take
# the certificate from it. (That they take it from the validation and not
# from the certificate, which would not wait, is a reference: an override
# cannot tell the two ARNs apart, so eksllm_test.go checks it in the HCL.)
run "listeners_wait_for_issuance_without_route53" {
  command = apply

  assert {
    condition     = aws_acm_certificate_validation.gateway.validation_record_fqdns == null
    error_message = "Without Route 53 the validation waits for the records you create."
  }
  assert {
    condition = (aws_lb_listener.gateway_tls.certificate_arn == aws_acm_certificate_validation.gateway.certificate_arn
    && aws_lb_listener.nodes_tls.certificate_arn == aws_acm_certificate_validation.gateway.certificate_arn)
    error_message = "Both TLS listeners must take the certificate from its validation (wait for issuance)."
  }
  assert {
    condition     = output.certificate_validations[0].type == "CNAME" && output.certificate_validations[0].name == "_0123.llm.example.com."
    error_message = "The validation records are an output."
  }
}

run "route53_validates_and_waits" {
  command = apply

  variables {
    route53_zone_id = "Z0123456789ABC"
  }

  assert {
    condition     = toset(aws_acm_certificate_validation.gateway.validation_record_fqdns) == toset([for r in aws_route53_record.gateway_validation : r.fqdn])
    error_message = "With Route 53 the validation checks the records the module writes."
  }
  assert {
    condition     = aws_route53_record.gateway_validation["llm.example.com"].name == "_0123.llm.example.com." && aws_route53_record.gateway_validation["llm.example.com"].type == "CNAME"
    error_message = "The validation record is the certificate's."
  }
  assert {
    condition     = aws_lb_listener.gateway_tls.certificate_arn == aws_acm_certificate_validation.gateway.certificate_arn
    error_message = "The TLS listener must take the certificate from its validation."
  }
}

run "gpu_nodes_pull_the_engine_from_ecr" {
  # apply: the key's ARN is known once the mocked key exists.
  command = apply

  assert {
    condition     = aws_ecr_repository.engine.image_tag_mutability == "IMMUTABLE"
    error_message = "The engine's repository must keep its tags immutable: a pushed tag never names another image."
  }
  assert {
    condition     = one(aws_ecr_repository.engine.image_scanning_configuration).scan_on_push
    error_message = "Every push of the engine must be scanned."
  }
  assert {
    condition     = one(aws_ecr_repository.engine.encryption_configuration).encryption_type == "KMS" && one(aws_ecr_repository.engine.encryption_configuration).kms_key == aws_kms_key.data.arn
    error_message = "The engine's repository must be encrypted with the module's key."
  }
  assert {
    condition     = contains([for a in aws_iam_role_policy_attachment.karpenter_node : a.policy_arn], "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly")
    error_message = "The GPU nodes' role must be able to pull from the account's ECR."
  }
}
