package adminwire

import "fmt"

// IdempotencyHeader makes a create retry-safe: a repeat with the same
// value returns the first create's record instead of making another.
const IdempotencyHeader = "Idempotency-Key"

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
