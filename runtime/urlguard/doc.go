// Package urlguard stops server-side request forgery through request
// bodies: an image URL, a tool definition or any other field that names a
// URL an engine or a tool runner might fetch must not point inside the
// platform's network — loopback, private and link-local ranges, cloud
// metadata endpoints, ranges not reachable on the Internet, IPv6 forms
// that carry an internal IPv4 address, or names that resolve to them.
//
// A string is judged as fetchers read it: trimmed of the controls, Unicode
// spaces and format characters (NBSP, BOM, zero-width) they strip, read by
// Go's URL parser and the WHATWG way, and its host mapped as IDNA-aware
// fetchers map it (UTS #46: "１２７.0.0.１" and "①②⑦.0.0.1" are 127.0.0.1),
// every reading checked. Local mode (AllowUnresolvable) lets a name that
// does not resolve pass, never an address or a name internal in any reading.
package urlguard
