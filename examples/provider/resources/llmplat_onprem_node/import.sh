# A node is imported by its node id. Everything but the token reads back:
# the platform keeps only the token's hash, so `token` is null after an
# import (`terraform apply -replace` issues a new one).
terraform import llmplat_onprem_node.rack1_gpu3 rack1-gpu3
