// Package adminclient is the typed Go client of the admin API
// (runtime/admin), speaking the wire types of runtime/adminwire. The
// Terraform provider, local mode, the command line and the tests use it; it
// links neither the server nor its stores.
//
// Client retries every call, through go-retryablehttp, on connection
// errors, answers cut short and 429, 502, 503 and 504 answers with
// bounded, jittered backoff (every admin call is safe to
// repeat: creates are idempotent by name, idempotency key or
// Idempotency-Key), and returns refusals as *adminwire.APIError. WaitReady
// repeats one cheap authenticated call for as long as its context allows
// while the platform is not there yet, and returns a refusal (a wrong
// token) at once. The Client follows no redirect (the admin API issues
// none, and Go's client would resend the token to another port of the
// same host): one fails the call with ErrRedirect, unretried. The Client
// never logs, and its errors never contain the token or a secret.
package adminclient
