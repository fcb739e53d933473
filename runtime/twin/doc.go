// Package twin is the cluster twin: the platform as rendered for EKS,
// running on a real Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) with simulated GPU nodes (KWOK
// nodes that Karpenter's kwok provider launches from the rendered
// NodePools), real engine processes (llmplat sim, one per engine pod, at
// the pod's address), KEDA acting on the rendered ScaledObjects and a
// Prometheus scraping engines and platform, so that scaling, waking,
// draining and consolidation can be watched over time.
//
// Everything runs inside a network namespace of the test's own (Main),
// where the pod range is local: pods get real, non-loopback addresses and
// nothing the twin runs can reach the host's network. Time runs faster by
// one factor (Cluster.Scale) for load times, cooldowns, polling and
// consolidation; figures are reported in real-world seconds too.
//
// The twin's binaries are built from the Go module proxy once and cached
// outside the checkout (make twinbins); tests find them through the
// environment variable BinariesEnv, and the API server and etcd through
// kubetest's.
package twin
