terraform {
  required_providers {
    llmplat = {
      source = "llmplat/llmplat"
    }
  }
}

# The endpoint and token may come from LLMPLAT_ENDPOINT and
# LLMPLAT_ADMIN_TOKEN instead.
provider "llmplat" {
  endpoint = "http://127.0.0.1:8080"
  token    = var.llmplat_admin_token
}

variable "llmplat_admin_token" {
  type      = string
  sensitive = true
}
