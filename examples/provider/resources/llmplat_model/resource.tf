# The engine's limits from the capacity planner.
data "llmplat_capacity_plan" "qwen_32b" {
  model                       = "qwen-32b"
  gpu                         = "L40S"
  tensor_parallel_size        = 2
  peak_streams                = 50
  planned_streams_per_replica = 16
}

resource "llmplat_model" "qwen_32b" {
  name                            = "qwen-32b"
  served_name                     = data.llmplat_capacity_plan.qwen_32b.served_name
  prompt_price_micro_per_mtok     = 300000
  completion_price_micro_per_mtok = 1200000
  max_context_tokens              = data.llmplat_capacity_plan.qwen_32b.max_model_len
  max_output_tokens               = 2048
}

# A model with its engines in the cluster (the provider's kubernetes
# block): the planner sizes the engine, KEDA scales it to zero outside
# office hours and keeps one replica warm inside them.
resource "llmplat_model" "llama_70b" {
  name                            = "llama-70b"
  served_name                     = "llama-70b"
  prompt_price_micro_per_mtok     = 4750000
  completion_price_micro_per_mtok = 19000000
  max_context_tokens              = 8192
  max_output_tokens               = 1024

  deployment = {
    namespace                   = "llmplat"
    revision                    = "2024-07-23"
    s3_bucket                   = "llmplat-models"
    s3_region                   = "eu-central-1"
    engine_image                = "123456789012.dkr.ecr.eu-central-1.amazonaws.com/inference/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    platform_image              = "123456789012.dkr.ecr.eu-central-1.amazonaws.com/llmplat:0.1.0"
    prometheus_url              = "http://prometheus-operated.monitoring.svc:9090"
    gpu                         = "L40S"
    gpus_per_replica            = 4
    planned_streams_per_replica = 8
    min_replicas                = 0
    max_replicas                = 3
    warm = {
      timezone = "Europe/Berlin"
      start    = "0 8 * * 1-5"
      end      = "0 19 * * 1-5"
    }
  }
}
