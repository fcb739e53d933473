# A key is imported by its numeric id; its secret is not readable, so
# `secret` stays null after an import.
terraform import llmplat_api_key.ci 17
