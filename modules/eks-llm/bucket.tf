# The model bucket: s3://<bucket>/<model>/<revision>/, private, encrypted
# with the module's key, versioned, TLS only; and the read-only role the
# model pods' modelsync init container takes (EKS Pod Identity on the
# platform namespace's vllm service account).

resource "aws_s3_bucket" "models" {
  bucket = local.model_bucket
  tags   = local.tags
}

resource "aws_s3_bucket_public_access_block" "models" {
  bucket                  = aws_s3_bucket.models.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "models" {
  bucket = aws_s3_bucket.models.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "models" {
  bucket = aws_s3_bucket.models.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = aws_kms_key.data.arn
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_versioning" "models" {
  bucket = aws_s3_bucket.models.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_policy" "models" {
  bucket = aws_s3_bucket.models.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "DenyHTTP"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [aws_s3_bucket.models.arn, "${aws_s3_bucket.models.arn}/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })

  depends_on = [aws_s3_bucket_public_access_block.models]
}

resource "aws_iam_role" "modelsync" {
  name               = "${var.name}-modelsync"
  assume_role_policy = local.pod_identity_trust
  tags               = local.tags
}

# Read only: list the bucket, get objects, decrypt with the key.
resource "aws_iam_role_policy" "modelsync" {
  name = "read-models"
  role = aws_iam_role.modelsync.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "List"
        Effect   = "Allow"
        Action   = ["s3:ListBucket"]
        Resource = aws_s3_bucket.models.arn
      },
      {
        Sid      = "Read"
        Effect   = "Allow"
        Action   = ["s3:GetObject"]
        Resource = "${aws_s3_bucket.models.arn}/*"
      },
      {
        Sid      = "Decrypt"
        Effect   = "Allow"
        Action   = ["kms:Decrypt"]
        Resource = aws_kms_key.data.arn
      },
    ]
  })
}

resource "aws_eks_pod_identity_association" "modelsync" {
  cluster_name    = aws_eks_cluster.this.name
  namespace       = var.namespace
  service_account = "vllm"
  role_arn        = aws_iam_role.modelsync.arn
  tags            = local.tags

  depends_on = [aws_eks_addon.this]
}
