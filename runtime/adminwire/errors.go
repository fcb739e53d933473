package adminwire

import "fmt"

// IdempotencyHeader makes a create retry-safe: a repeat with the same
// value returns the first create's record instead of making another.
const IdempotencyHeader = "Idempotency-Key"

// CreateOnlyHeader set to CreateOnlyValue makes POST /admin/teams and PUT
// /admin/models/{name} create only: a name the platform already has is
// refused with 409 CodeAlreadyExists, instead of answering the existing
// team or overwriting the existing model. The check is the database's
// unique name, so of concurrent creates of one name exactly one wins. With
// an Idempotency-Key, a retry of the winning create answers what it created.
const (
	CreateOnlyHeader = "If-None-Match"
	CreateOnlyValue  = "*"
)

// CodeAlreadyExists is the code of a create-only request's 409.
const CodeAlreadyExists = "already_exists"

// APIError is a refusal from the admin API, decoded from its OpenAI-shaped
// error body. Use errors.As to get it from an adminclient.Client error.
type APIError struct {
	// Status is the HTTP status.
	Status int
	// Type is the error type ("invalid_request_error", "not_found_error", …).
	Type string
	// Code is the machine-readable code ("invalid_value", "not_found", …).
	Code string
	// Param names the request field at fault, if any.
	Param string
	// Message is the human-readable explanation.
	Message string
}

// Error returns the status, code, param and message.
func (e *APIError) Error() string {
	s := fmt.Sprintf("admin api: %d %s", e.Status, e.Code)
	if e.Param != "" {
		s += " (" + e.Param + ")"
	}
	return s + ": " + e.Message
}
