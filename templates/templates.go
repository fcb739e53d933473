// Package templates holds the platform's Kubernetes manifests as Go
// text/templates, embedded in the binary: one source for every model,
// which `llmplat render` fills (runtime/render) and the Terraform provider
// and the EKS module are to use too.
package templates

import "embed"

// FS holds every template, by file name.
//
//go:embed *.yaml.tmpl
var FS embed.FS
