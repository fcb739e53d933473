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
//     their in-flight streams finish before the pods go. But for a model's
//     last ready engines (stranded: no ready engine of the model on a Node
//     that is not going): a PodDisruptionBudget keeps such a pod running
//     through a drift or an expiry, for as long as the NodePool's
//     terminationGracePeriod, so they stay in routing (and are put back
//     if a drain took them out while another engine served the model)
//     until another engine of the model is ready elsewhere. Every replica
//     reports them per model on StrandedDesc's gauge, on which the
//     ScaledObject of a model that may run one replica starts another.
//
// Every replica watches and routes; only the holder of a Lease acts on a
// drain (leader election), so one drain is decided once.
package clusterwatch
