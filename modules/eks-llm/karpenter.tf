# Karpenter's AWS side: the GPU nodes' role (the EC2NodeClass names it and
# Karpenter makes the instance profile, which its policy allows), the
# controller's role bound to its service account by EKS Pod Identity, and
# the interruption queue fed by EventBridge (spot interruption warnings,
# rebalance recommendations, instance state changes, AWS Health events), so
# a reclaimed spot node is drained before it goes.

resource "aws_iam_role" "karpenter_node" {
  name               = "${var.name}-karpenter-node"
  assume_role_policy = local.ec2_trust
  tags               = local.tags
}

resource "aws_iam_role_policy_attachment" "karpenter_node" {
  for_each = toset(local.node_policies)

  role       = aws_iam_role.karpenter_node.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/${each.value}"
}

# Karpenter's nodes join the cluster as EC2 Linux nodes.
resource "aws_eks_access_entry" "karpenter_node" {
  cluster_name  = aws_eks_cluster.this.name
  principal_arn = aws_iam_role.karpenter_node.arn
  type          = "EC2_LINUX"
  tags          = local.tags
}

resource "aws_sqs_queue" "karpenter_interruption" {
  name                      = "${var.name}-karpenter-interruption"
  message_retention_seconds = 300
  sqs_managed_sse_enabled   = true
  tags                      = local.tags
}

resource "aws_sqs_queue_policy" "karpenter_interruption" {
  queue_url = aws_sqs_queue.karpenter_interruption.url
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "EventBridgeAndSQS"
        Effect    = "Allow"
        Principal = { Service = ["events.${local.dns_suffix}", "sqs.${local.dns_suffix}"] }
        Action    = "sqs:SendMessage"
        Resource  = aws_sqs_queue.karpenter_interruption.arn
      },
      {
        Sid       = "DenyHTTP"
        Effect    = "Deny"
        Principal = "*"
        Action    = "sqs:*"
        Resource  = aws_sqs_queue.karpenter_interruption.arn
        Condition = { Bool = { "aws:SecureTransport" = "false" } }
      },
    ]
  })
}

locals {
  interruption_events = {
    health         = { source = ["aws.health"], "detail-type" = ["AWS Health Event"] }
    spot           = { source = ["aws.ec2"], "detail-type" = ["EC2 Spot Instance Interruption Warning"] }
    rebalance      = { source = ["aws.ec2"], "detail-type" = ["EC2 Instance Rebalance Recommendation"] }
    instance_state = { source = ["aws.ec2"], "detail-type" = ["EC2 Instance State-change Notification"] }
  }
}

resource "aws_cloudwatch_event_rule" "karpenter_interruption" {
  for_each = local.interruption_events

  name          = "${var.name}-karpenter-${replace(each.key, "_", "-")}"
  description   = "Karpenter interruption handling (${each.key})"
  event_pattern = jsonencode(each.value)
  tags          = local.tags
}

resource "aws_cloudwatch_event_target" "karpenter_interruption" {
  for_each = local.interruption_events

  rule      = aws_cloudwatch_event_rule.karpenter_interruption[each.key].name
  target_id = "karpenter-interruption-queue"
  arn       = aws_sqs_queue.karpenter_interruption.arn
}

resource "aws_iam_role" "karpenter" {
  name               = "${var.name}-karpenter"
  assume_role_policy = local.pod_identity_trust
  tags               = local.tags
}

# What the controller may do, scoped to this cluster's resources where the
# API allows it (its tag on launched instances and launch templates).
resource "aws_iam_role_policy" "karpenter" {
  name = "karpenter"
  role = aws_iam_role.karpenter.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid    = "Launch"
        Effect = "Allow"
        Action = ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:CreateTags"]
        Resource = [
          "arn:${local.partition}:ec2:${local.region}:*:*",
          "arn:${local.partition}:ec2:${local.region}::image/*",
        ]
      },
      {
        Sid      = "ClusterScopedDelete"
        Effect   = "Allow"
        Action   = ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"]
        Resource = "*"
        Condition = {
          StringEquals = { "aws:ResourceTag/kubernetes.io/cluster/${var.name}" = "owned" }
        }
      },
      {
        Sid    = "Read"
        Effect = "Allow"
        Action = [
          "ec2:DescribeAvailabilityZones", "ec2:DescribeImages", "ec2:DescribeInstances",
          "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates",
          "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
          "pricing:GetProducts", "ssm:GetParameter",
        ]
        Resource = "*"
      },
      {
        Sid      = "PassNodeRole"
        Effect   = "Allow"
        Action   = "iam:PassRole"
        Resource = aws_iam_role.karpenter_node.arn
        Condition = {
          StringEquals = { "iam:PassedToService" = "ec2.${local.dns_suffix}" }
        }
      },
      {
        Sid    = "InstanceProfiles"
        Effect = "Allow"
        Action = [
          "iam:GetInstanceProfile", "iam:CreateInstanceProfile", "iam:TagInstanceProfile",
          "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile",
          "iam:ListInstanceProfiles",
        ]
        Resource = "*"
      },
      {
        Sid      = "Interruptions"
        Effect   = "Allow"
        Action   = ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"]
        Resource = aws_sqs_queue.karpenter_interruption.arn
      },
      {
        Sid      = "Cluster"
        Effect   = "Allow"
        Action   = "eks:DescribeCluster"
        Resource = aws_eks_cluster.this.arn
      },
    ]
  })
}

resource "aws_eks_pod_identity_association" "karpenter" {
  cluster_name    = aws_eks_cluster.this.name
  namespace       = "kube-system"
  service_account = "karpenter"
  role_arn        = aws_iam_role.karpenter.arn
  tags            = local.tags

  depends_on = [aws_eks_addon.this]
}
