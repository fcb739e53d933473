# Day two (issue 43, "stays up"): what keeps the platform scaling and its
# GPUs healthy, checked offline against a mocked aws provider. The mocks
# are aws_layer.tftest.hcl's (terraform test shares none between files).

mock_provider "aws" {
  mock_data "aws_availability_zones" {
    defaults = { names = ["eu-central-1a", "eu-central-1b", "eu-central-1c"] }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws", dns_suffix = "amazonaws.com" }
  }
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012", arn = "arn:aws:sts::123456789012:assumed-role/terraform-runner/session" }
  }
  mock_data "aws_iam_session_context" {
    defaults = { issuer_arn = "arn:aws:iam::123456789012:role/terraform-runner" }
  }
  # A given VPC's subnets, read for the load balancer's ranges.
  mock_data "aws_subnet" {
    defaults = { cidr_block = "10.1.0.0/20" }
  }
  mock_data "aws_region" {
    defaults = { name = "eu-central-1" }
  }
  # An add-on's version for the cluster's minor, in the shape EKS gives.
  mock_data "aws_eks_addon_version" {
    defaults = { version = "v1.20.0-eksbuild.1" }
  }
  mock_data "aws_secretsmanager_random_password" {
    defaults = { random_password = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01" }
  }
  mock_resource "aws_eks_cluster" {
    defaults = {
      arn                   = "arn:aws:eks:eu-central-1:123456789012:cluster/inference"
      endpoint              = "https://inference.eks.example"
      certificate_authority = [{ data = "Y2E=" }]
    }
  }
  mock_resource "aws_rds_cluster" {
    defaults = {
      master_user_secret = [{ secret_arn = "arn:aws:secretsmanager:eu-central-1:123456789012:secret:rds-ledger", kms_key_id = "k", secret_status = "active" }]
    }
  }
  # Applied resources get ARNs of the right shape: the provider checks the
  # ARNs one resource hands another.
  mock_resource "aws_kms_key" {
    defaults = { arn = "arn:aws:kms:eu-central-1:123456789012:key/00000000-0000-0000-0000-000000000000" }
  }
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::123456789012:role/mock" }
  }
  mock_resource "aws_lb" {
    defaults = { arn = "arn:aws:elasticloadbalancing:eu-central-1:123456789012:loadbalancer/net/inference-gateway/0123456789abcdef" }
  }
  mock_resource "aws_lb_target_group" {
    defaults = { arn = "arn:aws:elasticloadbalancing:eu-central-1:123456789012:targetgroup/inference-gateway/0123456789abcdef" }
  }
  mock_resource "aws_acm_certificate" {
    defaults = {
      arn = "arn:aws:acm:eu-central-1:123456789012:certificate/00000000-0000-0000-0000-000000000000"
      domain_validation_options = [{
        domain_name           = "llm.example.com"
        resource_record_name  = "_0123.llm.example.com."
        resource_record_type  = "CNAME"
        resource_record_value = "_4567.acm-validations.aws."
      }]
    }
  }
  mock_resource "aws_security_group" {
    defaults = { id = "sg-0a0a0a0a0a0a0a0a0" }
  }
  mock_resource "aws_secretsmanager_secret" {
    defaults = { arn = "arn:aws:secretsmanager:eu-central-1:123456789012:secret:inference-redis-auth" }
  }
  mock_resource "aws_s3_bucket" {
    defaults = { arn = "arn:aws:s3:::inference-models-123456789012" }
  }
  mock_resource "aws_sns_topic" {
    defaults = { arn = "arn:aws:sns:eu-central-1:123456789012:inference-alerts" }
  }
  mock_data "aws_iam_roles" {
    defaults = { names = [] }
  }
  mock_resource "aws_sqs_queue" {
    defaults = { arn = "arn:aws:sqs:eu-central-1:123456789012:inference-karpenter-interruption" }
  }
}

variables {
  gateway_domain = "llm.example.com"
  # The runner inside the VPC's address range: the private endpoint's way in.
  private_api_endpoint_cidrs = ["10.0.0.0/8"]
}

# Item 1: a fresh account has no EC2 Spot service-linked role, and without
# it every launch in the spot pool fails.
run "spot_pool_can_launch_on_a_fresh_account" {
  command = plan

  assert {
    condition     = length(aws_iam_service_linked_role.spot) == 1 && aws_iam_service_linked_role.spot[0].aws_service_name == "spot.amazonaws.com"
    error_message = "The module must create the EC2 Spot service-linked role, or no spot GPU node launches on a fresh account."
  }
}

run "spot_role_left_to_an_account_that_has_it" {
  command = plan

  variables {
    create_spot_service_linked_role = false
  }

  assert {
    condition     = length(aws_iam_service_linked_role.spot) == 0
    error_message = "With create_spot_service_linked_role = false the module must not create the role (creating it again fails)."
  }

  # The mocked account has no such role: the check warns.
  expect_failures = [check.spot_service_linked_role]
}

# Item 4: Prometheus and Alertmanager keep their data on EBS volumes (the
# driver's role by Pod Identity, the module's key usable through EC2 only),
# and Alertmanager reaches a receiver: the SNS topic, with its own role.
run "monitoring_keeps_its_data_and_reaches_a_receiver" {
  command = apply

  variables {
    alert_emails = ["oncall@example.com"]
  }

  assert {
    condition     = aws_eks_addon.ebs_csi.addon_name == "aws-ebs-csi-driver" && one(aws_eks_addon.ebs_csi.pod_identity_association).role_arn == aws_iam_role.ebs_csi.arn && one(aws_eks_addon.ebs_csi.pod_identity_association).service_account == "ebs-csi-controller-sa"
    error_message = "The EBS CSI driver must be installed with its role bound to its controller's account: without it no PersistentVolumeClaim binds."
  }
  assert {
    condition     = aws_iam_role_policy_attachment.ebs_csi.policy_arn == "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
    error_message = "The EBS CSI driver's role needs AmazonEBSCSIDriverPolicy."
  }
  assert {
    condition     = one(jsondecode(aws_iam_role_policy.ebs_csi_kms.policy).Statement).Resource == aws_kms_key.data.arn && one(jsondecode(aws_iam_role_policy.ebs_csi_kms.policy).Statement).Condition.StringEquals["kms:ViaService"] == "ec2.eu-central-1.amazonaws.com"
    error_message = "The driver may use the module's key, through EC2 only (the StorageClass encrypts with it)."
  }
  assert {
    condition     = output.alerts_topic_arn == aws_sns_topic.alerts.arn && aws_sns_topic.alerts.kms_master_key_id == aws_kms_key.data.arn
    error_message = "Alertmanager's receiver is the encrypted alerts topic, an output for cluster-addons."
  }
  assert {
    condition     = aws_eks_pod_identity_association.alertmanager.namespace == "monitoring" && aws_eks_pod_identity_association.alertmanager.service_account == "kube-prometheus-stack-alertmanager" && aws_eks_pod_identity_association.alertmanager.role_arn == aws_iam_role.alertmanager.arn
    error_message = "Alertmanager's service account takes the publishing role by Pod Identity."
  }
  assert {
    condition     = [for s in jsondecode(aws_iam_role_policy.alertmanager.policy).Statement : s.Resource if s.Action == "sns:Publish"] == [aws_sns_topic.alerts.arn]
    error_message = "Alertmanager may publish to the alerts topic, and to no other."
  }
  assert {
    condition     = [for s in aws_sns_topic_subscription.alerts : s.endpoint] == ["oncall@example.com"] && alltrue([for s in aws_sns_topic_subscription.alerts : s.topic_arn == aws_sns_topic.alerts.arn && s.protocol == "email"])
    error_message = "Every address of alert_emails is subscribed to the alerts topic."
  }
}

# Item 5: the node monitoring agent turns a GPU's XID error into a Node
# condition, which Karpenter's node repair acts on.
run "gpu_faults_reach_the_node" {
  command = plan

  assert {
    condition     = aws_eks_addon.node_monitoring_agent.addon_name == "eks-node-monitoring-agent" && aws_eks_addon.node_monitoring_agent.cluster_name == aws_eks_cluster.this.name
    error_message = "The EKS node monitoring agent must run: without it a GPU lost to an XID error is never reported, and Karpenter never repairs its node."
  }
}
