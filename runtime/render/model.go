package render

import (
	"fmt"
	"math"
	"regexp"
	"text/template"
	"time"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/templates"
)

// ModelDeployment is one model's deployment on its own, as the Terraform
// provider's llmplat_model declares it: the objects of model.yaml.tmpl
// without a whole platform description around them.
type ModelDeployment struct {
	// Name is the platform's model name, and the objects' vllm-<name>.
	Name string
	// ServedName is the engine's --served-model-name; empty takes the
	// planner's.
	ServedName string
	Revision   string
	Namespace  string

	EngineImage, PlatformImage string
	// Bucket and Region are where modelsync reads the weights.
	Bucket, Region string
	// PrometheusURL is where KEDA reads the scaling metrics.
	PrometheusURL string
	// NodePool is the on-demand GPU pool; the spot pool is NodePool-spot.
	NodePool string
	// Spot allows the spot pool as well.
	Spot bool
	// Warm keeps one replica in a cron window.
	Warm                     *Warm
	MinReplicas, MaxReplicas int
	// DrainSeconds is how long a stopping pod's streams may run on
	// (default 300).
	DrainSeconds int

	// Workload is the capacity planner's input: the model profile, the
	// GPU profile, GPUs per replica, the longest context, the batch a
	// replica is planned for. The engine's flags are its answer.
	Workload capacity.WorkloadSpec
	// MaxNumSeqs, when positive, replaces the planner's --max-num-seqs.
	MaxNumSeqs int64
}

// ModelManifest is a rendered model: its objects (YAML, one document
// each) and the engine's flags they carry.
type ModelManifest struct {
	Data             []byte
	Flags            capacity.VLLMFlags
	KVCapacityTokens int64
}

// RenderModel plans d's workload and fills model.yaml.tmpl. A refusal
// wraps ErrInvalid and names the field (revision, workload, …).
func RenderModel(d ModelDeployment) (ModelManifest, error) {
	if d.DrainSeconds == 0 {
		d.DrainSeconds = 300
	}
	if err := d.validate(); err != nil {
		return ModelManifest{}, err
	}
	in, err := capacity.File{Workloads: []capacity.WorkloadSpec{d.Workload}}.Input()
	if err != nil {
		return ModelManifest{}, fmt.Errorf("%w: workload: %w", ErrInvalid, err)
	}
	plan, err := capacity.Plan(in)
	if err != nil {
		return ModelManifest{}, fmt.Errorf("%w: workload: %w", ErrInvalid, err)
	}
	mp := plan.Models[0]
	if err := fits(mp); err != nil {
		return ModelManifest{}, fmt.Errorf("%w: workload: %w", ErrInvalid, err)
	}
	if d.MaxNumSeqs > 0 {
		mp.Flags.MaxNumSeqs = d.MaxNumSeqs
	}
	if d.ServedName == "" {
		d.ServedName = mp.ServedName
	}
	tmpl, err := template.New("").Option("missingkey=error").ParseFS(templates.FS, "model.yaml.tmpl")
	if err != nil {
		return ModelManifest{}, fmt.Errorf("parse templates: %w", err)
	}
	v, err := d.values(mp)
	if err != nil {
		return ModelManifest{}, fmt.Errorf("%w: workload: %w", ErrInvalid, err)
	}
	b, err := execute(tmpl, "model", v)
	if err != nil {
		return ModelManifest{}, err
	}
	return ModelManifest{Data: b, Flags: mp.Flags, KVCapacityTokens: mp.Memory.KVCapacityTokensPerReplica}, nil
}

// validate checks what the template needs, naming the field at fault.
func (d ModelDeployment) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
	}
	required := []struct{ field, value string }{
		{"name", d.Name}, {"revision", d.Revision}, {"namespace", d.Namespace},
		{"engine_image", d.EngineImage}, {"platform_image", d.PlatformImage},
		{"bucket", d.Bucket}, {"region", d.Region}, {"prometheus_url", d.PrometheusURL}, {"node_pool", d.NodePool},
	}
	for _, r := range required {
		if r.value == "" {
			return bad(r.field, "required")
		}
	}
	for _, n := range []struct{ field, value string }{{"name", d.Name}, {"namespace", d.Namespace}, {"node_pool", d.NodePool}} {
		if !dnsLabel.MatchString(n.value) {
			return bad(n.field, "%q is not a Kubernetes name", n.value)
		}
	}
	// The values land in YAML unquoted: a line break, a quote or a comma
	// (the model-spec annotation's separator) would change the document,
	// not just the value.
	for _, v := range []struct{ field, value string }{{"served_name", d.ServedName}, {"revision", d.Revision},
		{"engine_image", d.EngineImage}, {"platform_image", d.PlatformImage}, {"bucket", d.Bucket},
		{"region", d.Region}, {"prometheus_url", d.PrometheusURL}} {
		if v.value != "" && !plainValue.MatchString(v.value) {
			return bad(v.field, "%q has characters a manifest cannot carry unquoted", v.value)
		}
	}
	switch {
	case !PinnedByDigest(d.EngineImage):
		return bad("engine_image", "%q is not pinned by digest (<repository>@sha256:<64 hex digits>): a tag names whatever was pushed to it last, "+
			"so a replica whose node pulls it later may run another engine; copy the image into your account's ECR and name it by its digest (docs/deploy-eks.md)", d.EngineImage)
	case d.MinReplicas < 0:
		return bad("min_replicas", "must not be negative, got %d", d.MinReplicas)
	case d.MaxReplicas <= 0:
		return bad("max_replicas", "must be positive, got %d", d.MaxReplicas)
	case d.MinReplicas > d.MaxReplicas:
		return bad("min_replicas", "%d is above max_replicas %d", d.MinReplicas, d.MaxReplicas)
	case d.DrainSeconds < 0:
		return bad("drain_seconds", "must not be negative")
	case d.MaxNumSeqs < 0:
		return bad("max_num_seqs", "must not be negative")
	case d.Warm != nil && (d.Warm.Timezone == "" || d.Warm.Start == "" || d.Warm.End == ""):
		return bad("warm", "timezone, start and end are required")
	case d.Spot && d.MinReplicas == d.MaxReplicas:
		return bad("spot", errSpotNoRoom)
	}
	return nil
}

// surgeFits refuses a model that may run one replica whose replacement
// cannot be ready before a drifted or expired GPU node deletes the old one:
// the stranded trigger's replica takes a cold start (expectedLoad), and
// Karpenter deletes a pod its budget holds at the NodePool's
// terminationGracePeriod less the pod's grace.
func surgeFits(d ModelDeployment, expectedLoad int) error {
	grace := d.DrainSeconds + modelGraceMargin
	if d.MinReplicas >= 2 || time.Duration(expectedLoad+grace)*time.Second < nodeTerminationGrace {
		return nil
	}
	return fmt.Errorf("min_replicas %d: a single replica's cold start (%d s) and grace (%d s) do not fit in a GPU node's %s terminationGracePeriod: "+
		"a drifted node would delete it before its replacement is ready; run at least 2", d.MinReplicas, expectedLoad, grace, nodeTerminationGrace)
}

// errSpotNoRoom refuses a spot model whose floor is its cap: the floor
// runs on on-demand nodes, so no replica would be left for spot.
const errSpotNoRoom = "min_replicas equals max_replicas: the floor runs on on-demand nodes, leaving no replica for spot"

// plainValue is a value the model's template may carry unquoted: a
// name, an image reference, a URL, a revision.
var plainValue = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+=~-]*$`)

// fits refuses a plan whose model leaves no room for a KV cache.
func fits(mp capacity.ModelPlan) error {
	if mp.Memory.KVCapacityTokensPerReplica <= 0 || mp.Flags.MaxNumSeqs <= 0 {
		return fmt.Errorf("%s does not fit its %d %s GPU(s): no room for a KV cache",
			mp.Model, mp.Flags.TensorParallelSize, mp.GPU)
	}
	return nil
}

// values fills model.yaml.tmpl from d and its plan; the engine's CPU and
// memory are its GPUs' share of the smallest EC2 instance that holds them.
func (d ModelDeployment) values(mp capacity.ModelPlan) (modelValues, error) {
	res, err := capacity.ReplicaResources(mp.GPU, mp.Flags.TensorParallelSize)
	if err != nil {
		return modelValues{}, err
	}
	pools := []string{d.NodePool}
	if d.Spot {
		pools = append(pools, d.NodePool+"-spot")
	}
	// A model allowed on spot keeps its whole floor on on-demand nodes, in
	// a Deployment of its own; the ScaledObject scales the rest.
	floor := 0
	if d.Spot {
		floor = d.MinReplicas
	}
	// Loading the weights from the local cache at about 200 MB/s is the
	// slowest part of a start; the startup probe allows that twice over.
	loadSeconds := mp.Memory.WeightBytes / weightsLoadRate
	expectedLoad := expectedLoadSeconds(mp.Memory.WeightBytes)
	if err := surgeFits(d, expectedLoad); err != nil {
		return modelValues{}, err
	}
	v := modelValues{
		Name: d.Name, ServedName: d.ServedName, Revision: d.Revision, Namespace: d.Namespace,
		EngineImage: d.EngineImage, PlatformImage: d.PlatformImage,
		Bucket: d.Bucket, Region: d.Region, PrometheusURL: d.PrometheusURL,
		Flags: mp.Flags, KVCapacityTokens: mp.Memory.KVCapacityTokensPerReplica,
		MinReplicas: d.MinReplicas - floor, MaxReplicas: d.MaxReplicas - floor,
		SingleReplica: d.MinReplicas < 2, Floor: floor,
		WaitingPerReplica: max(1, mp.Replicas.PlannedStreamsPerReplica/4),
		PlannedStreams:    mp.Replicas.PlannedStreamsPerReplica,
		NodePools:         pools, Spot: d.Spot, Warm: d.Warm,
		DrainSeconds: d.DrainSeconds, GraceSeconds: d.DrainSeconds + modelGraceMargin,
		DrainSettleSeconds: drainSettleSeconds, CacheHostPath: cacheHostPath,
		StartupChecks: 30 + int(math.Ceil(2*loadSeconds/10)),
		ShmSize:       fmt.Sprintf("%dGi", 4*mp.Flags.TensorParallelSize),
		Resources:     res,

		// A cold start from zero, and the autoscaler's wait before it may
		// take a replica away: wake.go.
		ExpectedLoadSeconds: expectedLoad, ScaleDownWindowSeconds: scaleDownWindowSeconds(expectedLoad),
		ProgressDeadlineSeconds: progressDeadlineSeconds(expectedLoad),
	}
	scaled := deploymentValues{modelValues: v, DeploymentName: "vllm-" + d.Name, Role: "scaled", PreferSpot: d.Spot}
	v.Deployments = []deploymentValues{scaled}
	if floor > 0 {
		onDemand := deploymentValues{modelValues: v, DeploymentName: "vllm-" + d.Name + "-on-demand", Role: "on-demand-floor", Replicas: floor}
		onDemand.NodePools = []string{d.NodePool}
		v.Deployments = append(v.Deployments, onDemand)
	}
	return v, nil
}
