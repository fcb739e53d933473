# The reference workload's 8B on one L40S: the engine's flags from the KV-cache arithmetic.
data "llmplat_capacity_plan" "llama_8b" {
  model                       = "llama-8b"
  gpu                         = "L40S"
  tensor_parallel_size        = 1
  peak_streams                = 140
  planned_streams_per_replica = 32
  min_replicas                = 2
  max_replicas                = 8
}

output "llama_8b_max_num_seqs" {
  value = data.llmplat_capacity_plan.llama_8b.max_num_seqs
}
