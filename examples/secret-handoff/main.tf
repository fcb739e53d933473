# A write-only API key handed to the service that uses it. The secret is
# minted in Terraform (the ephemeral llmplat_key_material), given to the
# platform write-only (secret_wo) and, in the same run, to AWS Secrets
# Manager write-only (secret_string_wo, hashicorp/aws 5.100.0 or later):
# neither the state nor the plan ever holds it. The service reads it from
# Secrets Manager (by the secret's ARN, output below).
#
# Rotation: bump key_version. The same run mints a new secret, rotates the
# key to it (the old secret is refused from then on) and writes it as the
# secret's new version. If an apply fails between the two, bump key_version
# again: an ephemeral secret is minted afresh on every run, so only a new
# version gives both sides the same one.

terraform {
  required_version = ">= 1.11"
  required_providers {
    llmplat = {
      source = "llmplat/llmplat"
    }
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.100.0"
    }
  }
}

# endpoint and token from LLMPLAT_ENDPOINT and LLMPLAT_ADMIN_TOKEN; the aws
# provider from the environment (AWS_REGION and the usual credentials).
provider "llmplat" {}

variable "key_version" {
  description = "The key's secret version: bump it to rotate the key and the stored secret together."
  type        = number
  default     = 1
}

resource "llmplat_team" "research" {
  name = "research"
}

ephemeral "llmplat_key_material" "batch" {}

resource "llmplat_api_key" "batch" {
  team_id           = llmplat_team.research.id
  name              = "batch jobs"
  max_streams       = 64
  secret_wo         = ephemeral.llmplat_key_material.batch.secret
  secret_wo_version = var.key_version
}

resource "aws_secretsmanager_secret" "batch_key" {
  name        = "llmplat/research/batch-jobs"
  description = "The llmplat API key of the research team's batch jobs (written by Terraform, write-only)."
}

resource "aws_secretsmanager_secret_version" "batch_key" {
  secret_id                = aws_secretsmanager_secret.batch_key.id
  secret_string_wo         = ephemeral.llmplat_key_material.batch.secret
  secret_string_wo_version = var.key_version
  # The store gets a secret only once the platform accepted it: a failed
  # key create leaves no secret that does not work.
  depends_on = [llmplat_api_key.batch]
}

output "batch_key_secret_arn" {
  description = "Where the batch jobs read their key."
  value       = aws_secretsmanager_secret.batch_key.arn
}
