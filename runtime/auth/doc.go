// Package auth turns a request's bearer credential into a verified
// principal. This file set starts with API keys: random secrets with a
// recognisable prefix, stored only as hashes.
package auth
