# Day two (issue 43, "stays up"): what keeps the platform scaling and its
# GPUs healthy, checked offline against a mocked aws provider (the mocks
# in tests/aws, shared with aws_layer.tftest.hcl).

mock_provider "aws" {
  source = "./tests/aws"
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
