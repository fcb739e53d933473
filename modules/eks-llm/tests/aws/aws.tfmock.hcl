# The aws provider's mocks for the module's terraform tests, shared by every
# test file (mock_provider "aws" { source = "./tests/aws" }): data sources
# answer in the shapes AWS gives, and applied resources get ARNs of the
# right shape, as the provider checks the ARNs one resource hands another.

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

mock_resource "aws_sqs_queue" {
  defaults = { arn = "arn:aws:sqs:eu-central-1:123456789012:inference-karpenter-interruption" }
}

mock_resource "aws_sns_topic" {
  defaults = { arn = "arn:aws:sns:eu-central-1:123456789012:inference-alerts" }
}

mock_data "aws_iam_roles" {
  defaults = { names = [] }
}
