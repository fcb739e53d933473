# The reference workload's three models on L40S: the 8B is hot (a floor of 2 on on-demand
# nodes, spot allowed for the burst above it), the 32B keeps one replica, the 70B scales to zero
# outside office hours. Prices in microcredits per million tokens.
#
# Each model's name is its capacity profile (runtime/capacity), which fixes
# the checkpoint to upload, its weight format and the served name below:
# the 70B is the FP8 checkpoint the planner sized, not Meta's BF16 one.
# `llmplat plan -f ../platform.yaml --format upload` prints the uploads;
# these models, revisions and bounds are examples/platform.yaml's (a test
# keeps them equal).
locals {
  models = {
    "llama-8b" = {
      served_name                     = "meta-llama/Llama-3.1-8B-Instruct"
      revision                        = "2024-07-23"
      gpus_per_replica                = 1
      planned_streams_per_replica     = 32
      peak_streams                    = 140
      min_replicas                    = 2
      max_replicas                    = 8
      spot                            = true
      prompt_price_micro_per_mtok     = 232500
      completion_price_micro_per_mtok = 930000
      max_context_tokens              = 8192
      max_output_tokens               = 1024
    }
    "qwen-32b" = {
      served_name                     = "Qwen/Qwen2.5-32B-Instruct"
      revision                        = "2024-09-19"
      gpus_per_replica                = 2
      planned_streams_per_replica     = 16
      peak_streams                    = 50
      min_replicas                    = 1
      max_replicas                    = 5
      prompt_price_micro_per_mtok     = 2050000
      completion_price_micro_per_mtok = 8200000
      max_context_tokens              = 8192
      max_output_tokens               = 1024
    }
    "llama-70b" = {
      served_name                 = "meta-llama/Llama-3.1-70B-Instruct-FP8"
      revision                    = "2024-07-23"
      gpus_per_replica            = 4
      planned_streams_per_replica = 8
      peak_streams                = 10
      min_replicas                = 0
      max_replicas                = 3
      warm = {
        timezone = "Europe/Berlin"
        start    = "0 8 * * 1-5"
        end      = "0 19 * * 1-5"
      }
      prompt_price_micro_per_mtok     = 4750000
      completion_price_micro_per_mtok = 19000000
      max_context_tokens              = 8192
      max_output_tokens               = 1024
    }
  }
}
