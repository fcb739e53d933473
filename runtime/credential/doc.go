// Package credential defines the shapes of the platform's bearer secrets:
// API keys ("llp_") and node tokens ("llpnode_"), each the prefix and 43
// base62 digits carrying 256 random bits. It mints them, recognises them
// before any lookup, and hashes them (SHA-256) into the only form that is
// stored.
//
// It imports nothing beyond the standard library, so a client that mints
// its secrets itself (the Terraform provider, so that a lost answer loses
// nothing) links neither the server nor its stores.
package credential
