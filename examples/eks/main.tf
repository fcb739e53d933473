# The whole platform on EKS: the AWS layer (modules/eks-llm), the in-cluster
# layer (its cluster-addons), and the models through the llmplat provider.
# docs/deploy-eks.md walks through it, from an empty account to a streamed
# completion. Give the runner a way to the Kubernetes API first
# (public_api_endpoint_cidrs, or private_api_endpoint_cidrs / _security_group_ids:
# the guide's step 1). Create the state bucket first (bootstrap/), then
# apply in steps the first time (the charts bring the CRDs the platform's
# objects are planned against):
#
#   terraform -chdir=bootstrap init && terraform -chdir=bootstrap apply
#   terraform -chdir=bootstrap output -raw backend_config > backend.hcl
#   terraform init -backend-config=backend.hcl
#   terraform apply -target=module.eks
#   terraform apply -target=module.addons.helm_release.karpenter -target=module.addons.helm_release.keda \
#     -target=module.addons.helm_release.kube_prometheus_stack -target=module.addons.helm_release.aws_load_balancer_controller
#   terraform apply

terraform {
  required_version = ">= 1.11"

  # The state holds the admin and internal tokens, the Redis AUTH token and
  # every API key's secret: it lives in the bootstrap stack's bucket
  # (bootstrap/: KMS-encrypted with a key of its own, versioned, TLS only),
  # locked by a lock file beside it (S3 native locking). The bucket, region
  # and key come from `terraform init -backend-config=backend.hcl`, which
  # the bootstrap stack writes (docs/deploy-eks.md, step 1).
  backend "s3" {
    key          = "llmplat/eks.tfstate"
    encrypt      = true
    use_lockfile = true
  }

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.100, < 6.0"
    }
    helm = {
      source  = "hashicorp/helm"
      version = ">= 2.17, < 3.0"
    }
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = ">= 2.36"
    }
    llmplat = {
      source  = "llmplat/llmplat"
      version = "0.1.0"
    }
  }
}

provider "aws" {
  region = var.region
}

module "eks" {
  source = "../../modules/eks-llm"

  name            = "inference"
  gateway_domain  = var.gateway_domain
  route53_zone_id = var.route53_zone_id
  tags            = { "cost-center" = "llm-platform" }

  # Who administers the cluster, and how the runner reaches its API.
  enable_cluster_creator_admin_permissions = var.enable_cluster_creator_admin_permissions
  cluster_admin_arns                       = var.cluster_admin_arns
  public_api_endpoint_cidrs                = var.public_api_endpoint_cidrs
  private_api_endpoint_cidrs               = var.private_api_endpoint_cidrs
  private_api_endpoint_security_group_ids  = var.private_api_endpoint_security_group_ids

  gateway_internal     = var.gateway_internal
  gateway_client_cidrs = var.gateway_client_cidrs
}

# The llmplat image lives in this account's ECR unless another is given;
# the engine in the module's engine repository, by the digest of the copy.
data "aws_caller_identity" "current" {}

locals {
  images = {
    engine        = coalesce(var.images.engine, "${module.eks.engine_repository_url}@${var.engine_digest}")
    platform      = coalesce(var.images.platform, "${data.aws_caller_identity.current.account_id}.dkr.ecr.${var.region}.amazonaws.com/llmplat:0.1.0")
    device_plugin = var.images.device_plugin
  }
}

# Every Kubernetes client takes a token from `aws eks get-token`: nothing
# long-lived is kept.
locals {
  kube_exec = {
    api_version = "client.authentication.k8s.io/v1beta1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", module.eks.cluster_name, "--region", var.region]
  }
}

provider "kubernetes" {
  host                   = module.eks.cluster_endpoint
  cluster_ca_certificate = base64decode(module.eks.cluster_ca_data)
  exec {
    api_version = local.kube_exec.api_version
    command     = local.kube_exec.command
    args        = local.kube_exec.args
  }
}

provider "helm" {
  kubernetes {
    host                   = module.eks.cluster_endpoint
    cluster_ca_certificate = base64decode(module.eks.cluster_ca_data)
    exec {
      api_version = local.kube_exec.api_version
      command     = local.kube_exec.command
      args        = local.kube_exec.args
    }
  }
}

# The llmplat provider checks its credentials before its first admin API
# call, waiting up to ready_timeout (10 min) for a gateway still starting.
# The gateway comes up in the same apply as the models (step 3): going
# through terraform_data (never created by steps 1 and 2, which -target)
# keeps the endpoint unknown at that first plan, so the plan defers the
# check to the apply, which waits for the gateway, instead of failing on a
# gateway that does not exist yet. Every later plan checks it.
resource "terraform_data" "gateway_endpoint" {
  input = module.eks.gateway.url
}

provider "llmplat" {
  endpoint = terraform_data.gateway_endpoint.output
  token    = var.admin_token

  kubernetes {
    host                   = module.eks.cluster_endpoint
    cluster_ca_certificate = base64decode(module.eks.cluster_ca_data)
    exec {
      api_version = local.kube_exec.api_version
      command     = local.kube_exec.command
      args        = local.kube_exec.args
    }
  }
}

module "addons" {
  source = "../../modules/eks-llm/cluster-addons"

  cluster        = module.eks
  images         = local.images
  admin_token    = var.admin_token
  internal_token = var.internal_token
  models         = local.models
}
