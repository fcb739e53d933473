# The AWS layer of an llmplat platform: the network, the EKS cluster with its
# system node group and add-ons, Karpenter's AWS side, Aurora PostgreSQL,
# ElastiCache Redis, the model bucket and the gateway's TLS edge. The
# in-cluster layer (cluster-addons/) is applied once the cluster exists.

data "aws_partition" "current" {}
data "aws_caller_identity" "current" {}
data "aws_region" "current" {}

data "aws_availability_zones" "available" {
  state = "available"
}

locals {
  partition  = data.aws_partition.current.partition
  account_id = data.aws_caller_identity.current.account_id
  region     = data.aws_region.current.name
  dns_suffix = data.aws_partition.current.dns_suffix

  tags = merge(var.tags, {
    "llmplat.io/cluster" = var.name
  })

  # Karpenter finds the GPU nodes' subnets and security group by this tag.
  discovery_tag = { "karpenter.sh/discovery" = var.name }

  model_bucket = coalesce(var.model_bucket_name, "${var.name}-models-${local.account_id}")

  # Who may take the module's roles: pods through EKS Pod Identity
  # (Karpenter, the load balancer controller, modelsync), or EC2 nodes.
  pod_identity_trust = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "pods.eks.amazonaws.com" }
      Action    = ["sts:AssumeRole", "sts:TagSession"]
    }]
  })
  ec2_trust = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.${local.dns_suffix}" }
      Action    = "sts:AssumeRole"
    }]
  })
}

# One key for every data store and the cluster's Secrets.
resource "aws_kms_key" "data" {
  description             = "${var.name}: EKS secrets, Aurora, ElastiCache, the model bucket and their secrets"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  tags                    = local.tags
}

resource "aws_kms_alias" "data" {
  name          = "alias/${var.name}-data"
  target_key_id = aws_kms_key.data.key_id
}
