# Who reaches the Kubernetes API, and from where. The in-cluster layer's
# helm, kubernetes and llmplat providers act as the principal running
# Terraform, so that principal needs cluster-admin (an access entry, as
# terraform-aws-eks's enable_cluster_creator_admin_permissions gives it)
# and a network way to the endpoint: the public endpoint for given CIDRs,
# or the private endpoint for given CIDRs or security groups, admitted on
# 443 by a security group of the control plane's own (not the cluster's
# shared group, which every node carries).

# An assumed role's session ARN is no IAM principal; its issuer, the role, is.
data "aws_iam_session_context" "current" {
  arn = data.aws_caller_identity.current.arn
}

locals {
  cluster_admin_arns = toset(concat(
    var.enable_cluster_creator_admin_permissions ? [data.aws_iam_session_context.current.issuer_arn] : [],
    var.cluster_admin_arns,
  ))
}

resource "aws_eks_access_entry" "admin" {
  for_each = local.cluster_admin_arns

  cluster_name  = aws_eks_cluster.this.name
  principal_arn = each.value
  type          = "STANDARD"
  tags          = local.tags
}

resource "aws_eks_access_policy_association" "admin" {
  for_each = local.cluster_admin_arns

  cluster_name  = aws_eks_cluster.this.name
  principal_arn = each.value
  policy_arn    = "arn:${local.partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"

  access_scope {
    type = "cluster"
  }

  depends_on = [aws_eks_access_entry.admin]
}

resource "aws_security_group" "api" {
  name        = "${var.name}-api"
  description = "The Kubernetes API's private endpoint: the Terraform runner and operators"
  vpc_id      = local.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-api" })
}

resource "aws_vpc_security_group_ingress_rule" "api_from_cidrs" {
  for_each = toset(var.private_api_endpoint_cidrs)

  security_group_id = aws_security_group.api.id
  description       = "The Kubernetes API from an admitted network"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_ingress_rule" "api_from_security_groups" {
  for_each = toset(var.private_api_endpoint_security_group_ids)

  security_group_id            = aws_security_group.api.id
  description                  = "The Kubernetes API from an admitted security group"
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  referenced_security_group_id = each.value
}
