# A model is imported by its name; a model the platform already declares
# must be imported before Terraform manages it.
terraform import llmplat_model.qwen_32b qwen-32b
