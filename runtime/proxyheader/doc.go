// Package proxyheader gives a listener the real client address of each
// connection that reaches it through a load balancer speaking the PROXY
// protocol (version 2 as an AWS Network Load Balancer sends it, version 1
// too), so that what the gateway counts and logs per client — the
// console's failed sign-ins above all — is the client's, not the load
// balancer's.
//
// A header is believed only from the load balancer's own addresses (the
// trusted prefixes, its subnets): from there a connection's address is the
// one its header names, or its own when it sends none (the kubelet's
// probes, in-cluster callers through the Service). A connection from
// anywhere else that opens with a header is refused before its request is
// read: it is either a client claiming an address it does not have, or a
// trust list that misses the load balancer, and both should be loud. The
// header is read within httpserve.ReadHeaderTimeout, as the request's own
// headers are. The parsing is github.com/pires/go-proxyproto's.
package proxyheader
