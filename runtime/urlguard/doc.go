// Package urlguard stops server-side request forgery through request
// bodies: an image URL, a tool definition or any other field that names a
// URL an engine or a tool runner might fetch must not point inside the
// platform's network — loopback, private and link-local ranges, cloud
// metadata endpoints, or names that resolve to them.
package urlguard
