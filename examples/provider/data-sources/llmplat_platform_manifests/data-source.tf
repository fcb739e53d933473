# The platform's own objects (`llmplat render` in HCL), for
# kubernetes_manifest in the cluster's add-on layer. The models' objects
# come from llmplat_model's deployment instead.
data "llmplat_platform_manifests" "platform" {
  description = yamlencode({
    cluster        = "inference"
    node_role      = "inference-karpenter-node"
    namespace      = "llmplat"
    prometheus_url = "http://prometheus-operated.monitoring.svc:9090"
    images = {
      engine        = "123456789012.dkr.ecr.eu-central-1.amazonaws.com/inference/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
      platform      = "123456789012.dkr.ecr.eu-central-1.amazonaws.com/llmplat:0.1.0"
      device_plugin = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
    }
    model_cache = { bucket = "inference-models-123456789012", region = "eu-central-1" }
    gpu_pool    = { gpu = "l40s", family = "g6e", gpu_limit = 16 }
    plan = {
      workloads = [{
        model                       = "llama-8b"
        gpu                         = "L40S"
        tensor_parallel_size        = 1
        peak_streams                = 140
        planned_streams_per_replica = 32
        min_replicas                = 2
        max_replicas                = 8
      }]
    }
    models = [{ name = "llama-8b", revision = "2024-07-23", spot = true }]
  })
}

output "gpu_node_pools" {
  value = [for k, v in data.llmplat_platform_manifests.platform.manifests : jsondecode(v).metadata.name if startswith(k, "karpenter.yaml/NodePool/")]
}
