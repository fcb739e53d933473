// Package drain is a process's way out from behind a network load balancer
// that keeps opening connections to a target for a while after it is told
// to stop (an AWS NLB: up to about 2 minutes after deregistration, and
// some 30 s after a failed health check). From the moment the process is
// asked to stop, its Gate answers the load balancer's health check 503 so
// the load balancer drains it by the faster of the two paths, while the
// process goes on serving every connection, old and new; only after the
// drain delay does the process close its listeners and finish its streams.
//
// A Gate is the health check's answer and the wait; what the process
// closes afterwards is its own (gateway.Server.Serve,
// orchestrator.Orchestrator.Run).
package drain
