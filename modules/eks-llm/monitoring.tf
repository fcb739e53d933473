# What keeps the cluster watching itself and its GPUs (issue 43):
#
# - the EBS CSI driver (a managed add-on, its role by EKS Pod Identity) and
#   so persistent gp3 volumes for Prometheus and Alertmanager: EKS has no
#   provisioner without it, and an emptyDir lost every series (and the
#   autoscaler's history) with its pod;
# - the EKS node monitoring agent (a managed add-on), which reports a GPU
#   lost to an XID error, a kernel or a network fault as a Node condition,
#   which Karpenter's node repair (cluster-addons) acts on by replacing the
#   node: a broken GPU no longer keeps vLLM restarting on a billed node;
# - an SNS topic Alertmanager publishes to (its role by EKS Pod Identity),
#   with the addresses of var.alert_emails subscribed.

resource "aws_iam_role" "ebs_csi" {
  name               = "${var.name}-ebs-csi"
  assume_role_policy = local.pod_identity_trust
  tags               = local.tags
}

resource "aws_iam_role_policy_attachment" "ebs_csi" {
  role       = aws_iam_role.ebs_csi.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
}

# The driver encrypts its volumes with the module's key (the StorageClass
# names it): its role may use the key through EC2 only.
resource "aws_iam_role_policy" "ebs_csi_kms" {
  name = "kms"
  role = aws_iam_role.ebs_csi.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect   = "Allow"
      Action   = ["kms:CreateGrant", "kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncrypt*"]
      Resource = aws_kms_key.data.arn
      Condition = {
        StringEquals = { "kms:ViaService" = "ec2.${local.region}.${local.dns_suffix}" }
      }
    }]
  })
}

resource "aws_eks_addon" "ebs_csi" {
  cluster_name                = aws_eks_cluster.this.name
  addon_name                  = "aws-ebs-csi-driver"
  resolve_conflicts_on_create = "OVERWRITE"
  resolve_conflicts_on_update = "PRESERVE"

  pod_identity_association {
    service_account = "ebs-csi-controller-sa"
    role_arn        = aws_iam_role.ebs_csi.arn
  }

  tags = local.tags

  # The pod identity agent binds the role; the controller runs on nodes.
  depends_on = [aws_eks_addon.this, aws_iam_role_policy_attachment.ebs_csi]
}

# The node monitoring agent runs on every node, the GPU nodes too (it
# tolerates every taint), and needs no AWS permission.
resource "aws_eks_addon" "node_monitoring_agent" {
  cluster_name                = aws_eks_cluster.this.name
  addon_name                  = "eks-node-monitoring-agent"
  resolve_conflicts_on_create = "OVERWRITE"
  resolve_conflicts_on_update = "PRESERVE"
  tags                        = local.tags

  depends_on = [aws_eks_node_group.system]
}

resource "aws_sns_topic" "alerts" {
  name              = "${var.name}-alerts"
  kms_master_key_id = aws_kms_key.data.arn
  tags              = local.tags
}

resource "aws_sns_topic_subscription" "alerts" {
  for_each = toset(var.alert_emails)

  topic_arn = aws_sns_topic.alerts.arn
  protocol  = "email"
  endpoint  = each.value
}

# Alertmanager's pods publish to the topic, and nothing else.
resource "aws_iam_role" "alertmanager" {
  name               = "${var.name}-alertmanager"
  assume_role_policy = local.pod_identity_trust
  tags               = local.tags
}

resource "aws_iam_role_policy" "alertmanager" {
  name = "publish-alerts"
  role = aws_iam_role.alertmanager.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Effect   = "Allow"
        Action   = "sns:Publish"
        Resource = aws_sns_topic.alerts.arn
      },
      {
        # The topic is encrypted with the module's key.
        Effect    = "Allow"
        Action    = ["kms:GenerateDataKey", "kms:Decrypt"]
        Resource  = aws_kms_key.data.arn
        Condition = { StringEquals = { "kms:ViaService" = "sns.${local.region}.${local.dns_suffix}" } }
      },
    ]
  })
}

resource "aws_eks_pod_identity_association" "alertmanager" {
  cluster_name    = aws_eks_cluster.this.name
  namespace       = "monitoring"
  service_account = local.alertmanager_service_account
  role_arn        = aws_iam_role.alertmanager.arn
  tags            = local.tags

  depends_on = [aws_eks_addon.this]
}

locals {
  # kube-prometheus-stack's Alertmanager account for the release named
  # kube-prometheus-stack (cluster-addons).
  alertmanager_service_account = "kube-prometheus-stack-alertmanager"
}
