// Package provider is the Terraform provider llmplat (terraform-plugin-
// framework, protocol 6): the platform team declares teams, credits, keys,
// models and on-premises nodes in HCL, and the provider applies them
// through the admin API's Go client, whose writes are idempotent by design.
package provider
