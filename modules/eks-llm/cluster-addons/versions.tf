# The in-cluster layer, applied once the AWS layer's cluster exists. Its
# providers (helm, kubernetes, llmplat, aws) are configured by the root
# module that calls it (examples/eks).
terraform {
  required_version = ">= 1.11"

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
      source = "llmplat/llmplat"
    }
  }
}
