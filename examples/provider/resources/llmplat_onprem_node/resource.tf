resource "llmplat_onprem_node" "rack1_gpu3" {
  node_id          = "rack1-gpu3"
  orchestrator_url = "wss://nodes.llmplat.example.com/v1/nodes/connect"
  gpu_count        = 2
  labels           = { site = "basement", rack = "1" }
  models = [{
    name            = "llama-8b"
    served_name     = "meta-llama/Llama-3.1-8B-Instruct"
    max_num_seqs    = 64
    max_model_len   = 8192
    kv_cache_tokens = 185000
  }]
}

# Run this on the node, with the token in LLMPLAT_NODE_TOKEN.
output "agent_command" {
  value = llmplat_onprem_node.rack1_gpu3.agent_command
}
