// Package httpserve builds the platform's HTTP servers with one set of
// limits on slow and idle connections: a deadline for the request's
// headers, one for its body, and an idle timeout between requests. A
// whole-request WriteTimeout is deliberately not set: it would cut the
// long streams these servers exist to carry.
package httpserve
