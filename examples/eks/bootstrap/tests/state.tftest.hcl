# The state bucket of examples/eks, checked offline against a mocked aws
# provider (make tfcheck): it holds every secret the platform has.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_resource "aws_kms_key" {
    defaults = { arn = "arn:aws:kms:eu-central-1:123456789012:key/00000000-0000-0000-0000-000000000000" }
  }
  mock_resource "aws_s3_bucket" {
    defaults = { id = "llmplat-tfstate-123456789012", arn = "arn:aws:s3:::llmplat-tfstate-123456789012" }
  }
}

run "state_is_encrypted_with_its_own_key" {
  command = apply

  assert {
    condition     = aws_kms_key.state.enable_key_rotation
    error_message = "The state's key must rotate."
  }
  assert {
    condition = one([for r in aws_s3_bucket_server_side_encryption_configuration.state.rule :
    one(r.apply_server_side_encryption_by_default).sse_algorithm == "aws:kms" && one(r.apply_server_side_encryption_by_default).kms_master_key_id == aws_kms_key.state.arn])
    error_message = "The state bucket must encrypt every object with the state's KMS key by default."
  }
  assert {
    condition     = strcontains(output.backend_config, "kms_key_id = \"${aws_kms_key.state.arn}\"") && strcontains(output.backend_config, "bucket     = \"${aws_s3_bucket.state.id}\"")
    error_message = "examples/eks's backend must write with the state's key, to the state bucket."
  }
}

run "state_is_versioned_private_and_tls_only" {
  command = apply

  assert {
    condition     = !coalesce(aws_s3_bucket.state.force_destroy, false)
    error_message = "A destroy must not empty the state bucket."
  }
  assert {
    condition     = one(aws_s3_bucket_versioning.state.versioning_configuration).status == "Enabled"
    error_message = "The state bucket must keep every version of the state."
  }
  assert {
    condition = (aws_s3_bucket_public_access_block.state.block_public_acls && aws_s3_bucket_public_access_block.state.block_public_policy &&
    aws_s3_bucket_public_access_block.state.ignore_public_acls && aws_s3_bucket_public_access_block.state.restrict_public_buckets)
    error_message = "The state bucket must block every kind of public access."
  }
  assert {
    condition = anytrue([for s in jsondecode(aws_s3_bucket_policy.state.policy).Statement :
    s.Effect == "Deny" && s.Condition.Bool["aws:SecureTransport"] == "false" && contains(s.Resource, "${aws_s3_bucket.state.arn}/*")])
    error_message = "The state bucket must refuse plain HTTP."
  }
}
