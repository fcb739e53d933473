# Where examples/eks keeps its Terraform state, created once before it: an
# S3 bucket (private, versioned, TLS only) encrypted with a KMS key of its
# own. That state holds the admin and internal tokens, the Redis AUTH token
# and every API key's secret, so it never stays on the runner's disk.
# examples/eks locks it with a lock file beside it (S3 native locking,
# use_lockfile: no DynamoDB table). This stack's own state holds the bucket's
# name and the key's ARN, no secret, and stays local (or is migrated into
# the bucket once it exists). docs/deploy-eks.md, step 1.

terraform {
  required_version = ">= 1.11"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.100, < 6.0"
    }
  }
}

provider "aws" {
  region = var.region
}

variable "region" {
  description = "The AWS region of the state bucket (examples/eks's region)."
  type        = string
  default     = "eu-central-1"
}

variable "bucket_name" {
  description = "The state bucket's name; default llmplat-tfstate-<account id>."
  type        = string
  default     = null

  validation {
    condition     = var.bucket_name == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name must be a valid S3 bucket name."
  }
}

data "aws_caller_identity" "current" {}

locals {
  bucket = coalesce(var.bucket_name, "llmplat-tfstate-${data.aws_caller_identity.current.account_id}")
  tags   = { "llmplat.io/purpose" = "terraform-state" }
}

resource "aws_kms_key" "state" {
  description             = "llmplat: the Terraform state of examples/eks"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  tags                    = local.tags
}

resource "aws_kms_alias" "state" {
  name          = "alias/llmplat-tfstate"
  target_key_id = aws_kms_key.state.key_id
}

# No force_destroy: S3 refuses to delete a bucket that holds objects, so a
# destroy of this stack stops here while the platform's state is in it.
resource "aws_s3_bucket" "state" {
  bucket = local.bucket
  tags   = local.tags
}

resource "aws_s3_bucket_public_access_block" "state" {
  bucket                  = aws_s3_bucket.state.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "state" {
  bucket = aws_s3_bucket.state.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

# Every object, the state and its lock file, under the key by default.
resource "aws_s3_bucket_server_side_encryption_configuration" "state" {
  bucket = aws_s3_bucket.state.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = aws_kms_key.state.arn
    }
    bucket_key_enabled = true
  }
}

# Every state written is kept: a bad apply or a corrupted write is undone
# by restoring the previous version.
resource "aws_s3_bucket_versioning" "state" {
  bucket = aws_s3_bucket.state.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_policy" "state" {
  bucket = aws_s3_bucket.state.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "DenyHTTP"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [aws_s3_bucket.state.arn, "${aws_s3_bucket.state.arn}/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })

  depends_on = [aws_s3_bucket_public_access_block.state]
}

output "bucket" {
  description = "The state bucket."
  value       = aws_s3_bucket.state.id
}

output "kms_key_arn" {
  description = "The state's KMS key."
  value       = aws_kms_key.state.arn
}

# The part of examples/eks's backend "s3" that depends on this account:
# `terraform output -raw backend_config > ../backend.hcl`, then, in
# examples/eks, `terraform init -backend-config=backend.hcl`.
output "backend_config" {
  description = "examples/eks's backend settings (terraform init -backend-config)."
  value = join("", [
    "bucket     = \"${aws_s3_bucket.state.id}\"\n",
    "region     = \"${var.region}\"\n",
    "kms_key_id = \"${aws_kms_key.state.arn}\"\n",
  ])
}
