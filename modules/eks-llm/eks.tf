# The EKS cluster: API authentication by access entries (access.tf, with
# the API endpoint's ways in), Secrets encrypted with the module's key,
# control-plane logs, the managed add-ons, and the system node group (m6i,
# AL2023) the platform's own processes run on.

resource "aws_iam_role" "cluster" {
  name = "${var.name}-cluster"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "eks.${local.dns_suffix}" }
      Action    = ["sts:AssumeRole", "sts:TagSession"]
    }]
  })
  tags = local.tags
}

resource "aws_iam_role_policy_attachment" "cluster" {
  role       = aws_iam_role.cluster.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/AmazonEKSClusterPolicy"
}

resource "aws_eks_cluster" "this" {
  name     = var.name
  version  = var.kubernetes_version
  role_arn = aws_iam_role.cluster.arn

  # Admins come from access entries (access.tf), which can be changed
  # later; the bootstrap flag cannot be without replacing the cluster.
  access_config {
    authentication_mode                         = "API"
    bootstrap_cluster_creator_admin_permissions = false
  }

  vpc_config {
    subnet_ids              = local.private_subnet_ids
    security_group_ids      = [aws_security_group.api.id]
    endpoint_private_access = true
    endpoint_public_access  = length(var.public_api_endpoint_cidrs) > 0
    public_access_cidrs     = length(var.public_api_endpoint_cidrs) > 0 ? var.public_api_endpoint_cidrs : null
  }

  encryption_config {
    resources = ["secrets"]
    provider {
      key_arn = aws_kms_key.data.arn
    }
  }

  enabled_cluster_log_types = ["api", "audit", "authenticator"]

  # Stated, not left to AWS's default (EXTENDED): what happens at the end
  # of the minor's standard support is a choice of price (upgrades.tf).
  upgrade_policy {
    support_type = var.kubernetes_support_type
  }

  tags = merge(local.tags, local.discovery_tag)

  depends_on = [aws_iam_role_policy_attachment.cluster]
}

# Karpenter's GPU nodes find the cluster's security group by the tag.
resource "aws_ec2_tag" "cluster_security_group_discovery" {
  resource_id = aws_eks_cluster.this.vpc_config[0].cluster_security_group_id
  key         = "karpenter.sh/discovery"
  value       = var.name
}

# The system node group's role (its nodes join as EC2 Linux nodes).
resource "aws_iam_role" "system_node" {
  name               = "${var.name}-system-node"
  assume_role_policy = local.ec2_trust
  tags               = local.tags
}

locals {
  node_policies = ["AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore"]
}

resource "aws_iam_role_policy_attachment" "system_node" {
  for_each = toset(local.node_policies)

  role       = aws_iam_role.system_node.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/${each.value}"
}

resource "aws_eks_node_group" "system" {
  cluster_name    = aws_eks_cluster.this.name
  node_group_name = "system"
  node_role_arn   = aws_iam_role.system_node.arn
  # The cluster's minor (once its control plane has moved): without it a
  # kubernetes_version bump left the nodes on the old kubelet.
  version        = aws_eks_cluster.this.version
  subnet_ids     = local.private_subnet_ids
  ami_type       = "AL2023_x86_64_STANDARD"
  capacity_type  = "ON_DEMAND"
  instance_types = var.system_instance_types
  disk_size      = 100

  scaling_config {
    min_size     = var.system_nodes.min
    desired_size = var.system_nodes.desired
    max_size     = var.system_nodes.max
  }

  update_config {
    max_unavailable = 1
  }

  labels = {
    "llmplat.io/pool" = "system"
  }

  tags = local.tags

  # The cluster autoscaler is Karpenter's job for GPUs; a resize by hand
  # must not be undone by the next apply.
  lifecycle {
    ignore_changes = [scaling_config[0].desired_size]
  }

  depends_on = [aws_iam_role_policy_attachment.system_node]
}

# The managed add-ons. The pod identity agent is what Karpenter's, the load
# balancer controller's and modelsync's roles are bound through.
locals {
  addons = ["vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"]
}

# Each add-on at AWS's default version for the cluster's minor, so a
# kubernetes_version bump moves them too (an unset addon_version stayed at
# the version first installed). The default, not the newest: a newer
# add-on build comes with the next minor, not with any apply. Read from the
# variable, not the cluster, so the plan shows the versions; the add-ons
# still change after the control plane and the system nodes (depends_on).
data "aws_eks_addon_version" "this" {
  for_each = toset(local.addons)

  addon_name         = each.value
  kubernetes_version = var.kubernetes_version
  most_recent        = false
}

resource "aws_eks_addon" "this" {
  for_each = toset(local.addons)

  cluster_name                = aws_eks_cluster.this.name
  addon_name                  = each.value
  addon_version               = data.aws_eks_addon_version.this[each.value].version
  resolve_conflicts_on_create = "OVERWRITE"
  resolve_conflicts_on_update = "PRESERVE"
  tags                        = local.tags

  # coredns needs nodes to become active.
  depends_on = [aws_eks_node_group.system]
}
