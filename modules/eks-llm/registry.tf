# The engine's image in this account's ECR. Every GPU node that starts
# pulls vLLM's ~10 GB image; from Docker Hub they would all pull
# anonymously behind the NAT gateway's one address, which Docker Hub
# rate-limits per address, so a scale-up stalls in ImagePullBackOff. From
# ECR the nodes pull with their role (AmazonEC2ContainerRegistryReadOnly,
# eks.tf) and the layers come from S3 through the VPC's gateway endpoint,
# not the NAT gateway. The guide copies the image here once and deploys it
# by digest; tags cannot be moved (IMMUTABLE), every push is scanned, and
# the layers are encrypted with the module's key (ECR holds a grant on it:
# the nodes need no KMS permission to pull).
resource "aws_ecr_repository" "engine" {
  name                 = "${var.name}/vllm-openai"
  image_tag_mutability = "IMMUTABLE"

  image_scanning_configuration {
    scan_on_push = true
  }

  encryption_configuration {
    encryption_type = "KMS"
    kms_key         = aws_kms_key.data.arn
  }

  tags = local.tags
}
