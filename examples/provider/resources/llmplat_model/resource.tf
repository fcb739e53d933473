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
