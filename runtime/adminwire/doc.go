// Package adminwire is the admin API's wire format: the request and answer
// bodies, the list envelope, the Idempotency-Key header and APIError, the
// refusal a client decodes from the OpenAI-shaped error body. The server
// (runtime/admin) and its client (runtime/adminclient) both use these
// types, so the two cannot drift apart.
//
// Money is integer micro-credits (1 credit = 1,000,000), never a float; a
// limit of 0 means unlimited; times are RFC 3339 in UTC. The package
// imports only the standard library.
package adminwire
