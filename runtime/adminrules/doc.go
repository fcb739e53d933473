// Package adminrules holds the admin API's rules for the values a client
// sends: names, free text, limits, allowlists, credit grants and model
// specs. The admin API checks each request with them, and the Terraform
// provider checks a configuration with the same functions at plan, so a
// value that passes `terraform plan` is a value the API takes: the two
// cannot drift.
//
// Each rule returns nil or a *FieldError naming the request field at fault
// with a message that names it too ("rpm must be between 0 (unlimited) and
// 2147483647"). The API returns that message in the OpenAI error shape with
// the field as param; the provider shows it at the attribute.
//
// The package imports only the standard library: it must stay small enough
// for the provider to link without the server.
package adminrules
