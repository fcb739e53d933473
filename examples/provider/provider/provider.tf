terraform {
  required_providers {
    llmplat = {
      source = "llmplat/llmplat"
    }
  }
}

# The endpoint and token may come from LLMPLAT_ENDPOINT and
# LLMPLAT_ADMIN_TOKEN instead. The kubernetes block is needed only by
# llmplat_model's deployment; here it reaches an EKS cluster with a token
# from `aws eks get-token`, as the kubernetes provider would.
provider "llmplat" {
  endpoint = "http://127.0.0.1:8080"
  token    = var.llmplat_admin_token

  kubernetes {
    host                   = var.cluster_endpoint
    cluster_ca_certificate = base64decode(var.cluster_ca_data)
    exec {
      api_version = "client.authentication.k8s.io/v1beta1"
      command     = "aws"
      args        = ["eks", "get-token", "--cluster-name", "inference"]
    }
  }
}

variable "llmplat_admin_token" {
  type      = string
  sensitive = true
}

variable "cluster_endpoint" {
  type = string
}

variable "cluster_ca_data" {
  type = string
}
