package render

import "math"

// A model's cold start from zero on EKS, the parts that grow with nothing
// but the weights fixed: what the Retry-After of a model at zero starts
// from (the model-spec annotation's expected-load), and what the
// autoscaler must wait out before it may take a new replica away.
const (
	// nodeLaunchSeconds: Karpenter's launch of a GPU instance, its boot
	// and its join to the cluster with the NVIDIA driver loaded, about
	// 2–3 min for a g6e.
	nodeLaunchSeconds = 180
	// imagePullSeconds: the vLLM image, about 10 GB, pulled onto a fresh
	// node's empty containerd store.
	imagePullSeconds = 240
	// weightsSyncRate: modelsync's copy of the weights from S3 to the
	// local NVMe, files in parallel, at a conservative 250 MB/s.
	weightsSyncRate = 250e6
	// weightsLoadRate: vLLM reading the weights from the local cache into
	// the GPUs, about 200 MB/s; the startup probe allows twice that.
	weightsLoadRate = 200e6
	// engineWarmupSeconds: vLLM's profiling run and CUDA graph capture
	// after the weights are in.
	engineWarmupSeconds = 60
	// minScaleDownWindowSeconds is the HPA's scale-down stabilisation for
	// a model that loads fast: five minutes of low load before a replica
	// goes.
	minScaleDownWindowSeconds = 300
	// defaultProgressDeadlineSeconds is Kubernetes' default of a
	// Deployment's progressDeadlineSeconds.
	defaultProgressDeadlineSeconds = 600
)

// expectedLoadSeconds is how long a replica of weightBytes is expected to
// take from zero — no node, no cache — to Ready.
func expectedLoadSeconds(weightBytes float64) int {
	return nodeLaunchSeconds + imagePullSeconds + engineWarmupSeconds +
		int(math.Ceil(weightBytes/weightsSyncRate+weightBytes/weightsLoadRate))
}

// progressDeadlineSeconds is how long a model's rollout may go without a
// new replica turning available before the Deployment reports it failed
// (ProgressDeadlineExceeded): two cold starts, at least Kubernetes' own
// default of 10 min. The default alone is shorter than the larger
// models' expected loads (over 1,100 s for the 70B on L40S), so every
// rollout of them would report a failure while it is merely loading.
func progressDeadlineSeconds(expectedLoad int) int {
	return max(defaultProgressDeadlineSeconds, 2*expectedLoad)
}

// scaleDownWindowSeconds is the HPA's scale-down stabilisation: at least
// a cold start, so that a replica the load asked for is not removed
// before it could have loaded and served (the HPA keeps the highest
// recommendation of the window).
func scaleDownWindowSeconds(expectedLoad int) int {
	return max(minScaleDownWindowSeconds, expectedLoad)
}
