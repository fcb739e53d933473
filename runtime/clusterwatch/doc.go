// Package clusterwatch is the orchestrator's Kubernetes controller. With
// client-go informers (watches, never polling) it keeps two things:
//
//   - the cloud nodes: every ready endpoint of a model's Service (a Service
//     labelled ModelLabel, whose ModelSpecAnnotation gives the engine's
//     limits) is a node the orchestrator routes to by KV cache, reaching it
//     at the endpoint's address. An endpoint that goes unready leaves
//     routing at once. The annotation's expected-load (ExpectedLoadKey)
//     is read whether or not the Service has endpoints: it is how long a
//     model at zero is expected to take to a ready replica, the
//     Retry-After its callers start from (package coldstart).
//   - spot reclaims and other disruptions: when a Kubernetes Node is marked
//     for disruption (Karpenter's disruption taint, the interruption
//     handler's taint, a cordon or a deletion), the engines on it are
//     drained over the control plane: no new assignments anywhere, while
//     their in-flight streams finish before the pods go.
//
// Every replica watches and routes; only the holder of a Lease acts on a
// drain (leader election), so one drain is decided once.
package clusterwatch
