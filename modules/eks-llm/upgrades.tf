# What a Kubernetes minor needs of the rest of the cluster. Bumping
# kubernetes_version moves the control plane, the system node group and the
# managed add-ons (eks.tf: their versions follow the cluster's); the GPU
# nodes follow through Karpenter, which must support the minor, and their
# AMI release, which must have a build for it (Karpenter resolves
# al2023@vYYYYMMDD to that release's build for the cluster's minor). The
# variables' validations refuse a pair that would leave the GPU pools
# unable to launch a node; docs/deploy-eks.md's Upgrades section is the
# runbook.

locals {
  # Per minor: the oldest Karpenter that supports it (Karpenter's
  # compatibility matrix: 1.33 from 1.5, 1.34 from 1.6, 1.35 from 1.9; 1.10
  # stops at 1.35), the oldest AL2023 EKS AMI release known to carry its
  # builds (a newer one always does), and the end of its EKS standard
  # support (14 months after EKS released it; extended support costs about
  # six times the control-plane hour). A new minor gets a row once a
  # Karpenter release supports it.
  kubernetes_minors = {
    "1.33" = { karpenter = 1005000, ami_release = 20250620, standard_support_ends = "2026-07-29T00:00:00Z" }
    "1.34" = { karpenter = 1006000, ami_release = 20251007, standard_support_ends = "2026-12-02T00:00:00Z" }
    "1.35" = { karpenter = 1009000, ami_release = 20260224, standard_support_ends = "2027-03-27T00:00:00Z" }
  }

  # karpenter_version as one comparable number (1.10.0: 1010000).
  karpenter_version_number = try(sum([for i, p in split(".", var.karpenter_version) : tonumber(p) * pow(1000, 2 - i)]), 0)

  # The AMI release the GPU nodes run: gpu_pool.ami_alias, or the one
  # `llmplat render` pins when it is unset (render.DefaultAMIAlias; a Go
  # test keeps the two equal).
  default_gpu_ami_alias = "al2023@v20260403"
  gpu_ami_alias         = coalesce(var.gpu_pool.ami_alias, local.default_gpu_ami_alias)
  gpu_ami_release       = try(tonumber(regex("[0-9]{8}$", local.gpu_ami_alias)), 0)

  # When the support check looks: var.support_checked_at, or now.
  support_checked_at = coalesce(var.support_checked_at, plantimestamp())
}

# A plan past the end of the minor's standard support warns: with
# kubernetes_support_type STANDARD, EKS upgrades the control plane itself
# (then the node group and add-ons lag it until the next apply), with
# EXTENDED the control plane costs about six times as much. The module's
# tests compare with a pinned time (support_checked_at) and one of them
# expects this check to fail past the date.
check "kubernetes_version_in_standard_support" {
  assert {
    condition     = !contains(keys(local.kubernetes_minors), var.kubernetes_version) || timecmp(local.support_checked_at, try(local.kubernetes_minors[var.kubernetes_version].standard_support_ends, local.support_checked_at)) < 0
    error_message = "Kubernetes ${var.kubernetes_version} is past its EKS standard support (it ended ${try(local.kubernetes_minors[var.kubernetes_version].standard_support_ends, "?")}): upgrade to the next minor (docs/deploy-eks.md, Upgrades)."
  }
}
