# A complete platform as code: the three models of the reference workload (docs/requirements.md) with their limits
# from the capacity planner, two teams with credit, keys with different
# limits (one whose secret never lands in state), and an on-premises node.
# Against `make run`: see docs/terraform.md (dev_overrides, then
# LLMPLAT_ENDPOINT and LLMPLAT_ADMIN_TOKEN as make run prints them).

terraform {
  required_providers {
    llmplat = {
      source = "llmplat/llmplat"
    }
  }
}

# endpoint and token from LLMPLAT_ENDPOINT and LLMPLAT_ADMIN_TOKEN.
provider "llmplat" {}

# `make run` declares these three models so that a newcomer can stream at
# once, and the provider never takes over a model that exists ("already
# exists — import it"): this configuration adopts them in the open. From
# then on Terraform manages them, and a destroy deletes them. Against a
# platform that does not declare them yet (a fresh EKS deployment), delete
# these three blocks.
import {
  to = llmplat_model.llama_8b
  id = "llama-8b"
}

import {
  to = llmplat_model.qwen_32b
  id = "qwen-32b"
}

import {
  to = llmplat_model.llama_70b
  id = "llama-70b"
}

# The models, each with its engine limits from the capacity planner (on
# L40S, as the reference deployment runs them).
data "llmplat_capacity_plan" "llama_8b" {
  model                       = "llama-8b"
  gpu                         = "L40S"
  tensor_parallel_size        = 1
  peak_streams                = 140
  planned_streams_per_replica = 32
  min_replicas                = 2
  max_replicas                = 8
}

resource "llmplat_model" "llama_8b" {
  name                            = "llama-8b"
  served_name                     = "llama-8b"
  prompt_price_micro_per_mtok     = 232500
  completion_price_micro_per_mtok = 930000
  max_context_tokens              = data.llmplat_capacity_plan.llama_8b.max_model_len
  max_output_tokens               = 1024
}

data "llmplat_capacity_plan" "qwen_32b" {
  model                       = "qwen-32b"
  gpu                         = "L40S"
  tensor_parallel_size        = 2
  peak_streams                = 50
  planned_streams_per_replica = 16
  min_replicas                = 1
  max_replicas                = 5
}

resource "llmplat_model" "qwen_32b" {
  name                            = "qwen-32b"
  served_name                     = "qwen-32b"
  prompt_price_micro_per_mtok     = 2050000
  completion_price_micro_per_mtok = 8200000
  max_context_tokens              = data.llmplat_capacity_plan.qwen_32b.max_model_len
  max_output_tokens               = 1024
}

data "llmplat_capacity_plan" "llama_70b" {
  model                       = "llama-70b"
  gpu                         = "L40S"
  tensor_parallel_size        = 4
  peak_streams                = 10
  planned_streams_per_replica = 8
  min_replicas                = 0
  max_replicas                = 3
}

resource "llmplat_model" "llama_70b" {
  name                            = "llama-70b"
  served_name                     = "llama-70b"
  prompt_price_micro_per_mtok     = 4750000
  completion_price_micro_per_mtok = 19000000
  max_context_tokens              = data.llmplat_capacity_plan.llama_70b.max_model_len
  max_output_tokens               = 1024
}

resource "llmplat_team" "search" {
  name = "search"
}

resource "llmplat_team" "research" {
  name = "research"
}

resource "llmplat_credit" "search_q4" {
  team_id             = llmplat_team.search.id
  amount_microcredits = 500000000000
  note                = "2026 Q4"
}

resource "llmplat_credit" "research_q4" {
  team_id             = llmplat_team.research.id
  amount_microcredits = 2000000000000
  note                = "2026 Q4"
}

# The search team's service: the small model only, a tight rate, answers
# of at most 1,024 tokens. The allowlist names the model by its id, not its
# name: the id is known once the model exists, so on a platform that does
# not declare it yet the check waits for the apply, after the model is
# created (by name, strict mode refuses it at plan).
resource "llmplat_api_key" "search_service" {
  team_id         = llmplat_team.search.id
  name            = "search service"
  model_allowlist = [llmplat_model.llama_8b.id]
  rpm             = 600
  tokens_per_day  = 5000000
  max_streams     = 16
  max_tokens      = 1024
  rotation        = "2026-12"
}

# Research batch jobs: every model, many streams; the secret is minted in
# Terraform and never stored in state. Here nobody receives it (the example
# needs no cloud account); examples/secret-handoff hands the same kind of
# key to AWS Secrets Manager in the same run.
ephemeral "llmplat_key_material" "research_batch" {}

resource "llmplat_api_key" "research_batch" {
  team_id           = llmplat_team.research.id
  name              = "batch jobs"
  max_streams       = 64
  secret_wo         = ephemeral.llmplat_key_material.research_batch.secret
  secret_wo_version = 1
}

resource "llmplat_onprem_node" "basement_gpu1" {
  node_id          = "basement-gpu1"
  orchestrator_url = "wss://nodes.llmplat.example.com/v1/nodes/connect"
  gpu_count        = 1
  labels           = { site = "basement" }
  models = [{
    name            = llmplat_model.llama_8b.name
    served_name     = "meta-llama/Llama-3.1-8B-Instruct"
    max_num_seqs    = data.llmplat_capacity_plan.llama_8b.max_num_seqs
    max_model_len   = data.llmplat_capacity_plan.llama_8b.max_model_len
    kv_cache_tokens = data.llmplat_capacity_plan.llama_8b.kv_cache_tokens
  }]
}

output "search_service_key" {
  value     = llmplat_api_key.search_service.secret
  sensitive = true
}

output "basement_gpu1_agent" {
  value = llmplat_onprem_node.basement_gpu1.agent_command
}
