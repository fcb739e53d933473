// Package render fills the platform's Kubernetes templates (templates/)
// from a platform description: the models and their engine flags from the
// capacity planner, the node pools, images, namespace and model cache.
// `llmplat render` writes what it returns; GitOps users apply that.
package render

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/proxyheader"
	"github.com/llmplat/llmplat/templates"
)

// Platform is a platform description as a person writes it (YAML).
type Platform struct {
	// Cluster is the EKS cluster's name: Karpenter finds its subnets and
	// security groups by the karpenter.sh/discovery tag with it.
	Cluster string `yaml:"cluster"`
	// NodeRole is the IAM role of the GPU nodes Karpenter launches.
	NodeRole  string `yaml:"node_role"`
	Namespace string `yaml:"namespace"`
	Images    struct {
		Engine       string `yaml:"engine"`        // <registry>/<repository>@sha256:<digest> (vLLM)
		Platform     string `yaml:"platform"`      // the llmplat binary's image
		DevicePlugin string `yaml:"device_plugin"` // NVIDIA's k8s-device-plugin
	} `yaml:"images"`
	ModelCache struct {
		Bucket string `yaml:"bucket"`
		Region string `yaml:"region"`
	} `yaml:"model_cache"`
	// PrometheusURL is where KEDA reads the scaling metrics.
	PrometheusURL string `yaml:"prometheus_url"`
	Gateway       struct {
		Replicas int `yaml:"replicas"`
		// ProxyProtocolFrom are the load balancer's subnets (CIDRs): the
		// gateway reads the client's address from the PROXY protocol header
		// of connections from there alone (-proxy-protocol-from). The EKS
		// module sets them; empty reads no header.
		ProxyProtocolFrom []string `yaml:"proxy_protocol_from"`
	} `yaml:"gateway"`
	Orchestrator struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"orchestrator"`
	// GPUPool is the Karpenter pools' instance family and GPU limit; the
	// pool is "gpu-<gpu>" on demand and "gpu-<gpu>-spot".
	GPUPool struct {
		GPU    string `yaml:"gpu"`    // l40s
		Family string `yaml:"family"` // g6e
		// GPULimit bounds the nvidia.com/gpu each pool may hold (each is
		// capped at what its models may run on it, poolNeeds): a cap on
		// spend, which must not be below what the models' caps need, or
		// KEDA would scale to replicas Karpenter refuses to buy nodes for.
		GPULimit int `yaml:"gpu_limit"`
		// AMIAlias is the EC2NodeClass's AMI, a pinned AL2023 EKS AMI
		// release (default DefaultAMIAlias); @latest is refused.
		AMIAlias string `yaml:"ami_alias"`
	} `yaml:"gpu_pool"`
	// DrainSeconds is how long a model pod's streams may run on after it
	// is told to stop (default 300).
	DrainSeconds int `yaml:"drain_seconds"`
	// Plan is the capacity planner's input: the models' workloads (GPU,
	// tensor parallelism, streams, contexts, replica bounds).
	Plan capacity.File `yaml:"plan"`
	// Models are the models to deploy, each with a workload in Plan.
	Models []Model `yaml:"models"`
}

// Model is one model's deployment choices.
type Model struct {
	Name     string `yaml:"name"`
	Revision string `yaml:"revision"`
	// Spot allows the spot pool (the reference workload: the 8B only).
	Spot bool `yaml:"spot"`
	// Warm keeps one replica in a window (cron), for a model that scales
	// to zero.
	Warm *Warm `yaml:"warm"`
}

// Warm is a cron window: KEDA's cron trigger.
type Warm struct {
	Timezone string `yaml:"timezone"`
	Start    string `yaml:"start"` // cron, "0 8 * * 1-5"
	End      string `yaml:"end"`
}

// ErrInvalid marks a description that cannot be rendered; the message
// names the field.
var ErrInvalid = errors.New("invalid platform description")

// File is one rendered manifest file.
type File struct {
	Name string
	Data []byte
}

// DefaultAMIAlias is the GPU nodes' AMI when gpu_pool.ami_alias is not
// set: a release of the AL2023 EKS AMI with builds for Kubernetes 1.33 to
// 1.35 (Karpenter picks the cluster's; modules/eks-llm refuses a
// kubernetes_version the release has none for, from its copy of this
// value). Bump it (or set ami_alias) to a newer release from the AMI's
// release notes once a staging cluster ran it; Karpenter then replaces the
// nodes as drifted.
const DefaultAMIAlias = "al2023@v20260403"

// amiAlias is a pinned AL2023 release: Karpenter advises against @latest
// in production (any new AMI would replace every GPU node).
var amiAlias = regexp.MustCompile(`^al2023@v[0-9]{8}$`)

// The GPU nodes' lifetime bounds (NodePool template), as Karpenter
// durations.
const (
	// nodeTerminationGrace is the longest a GPU node drains before its
	// pods are deleted despite their PDBs: 1 h lets a second replica of a
	// single-replica model load (a 70B cold start takes over 10 min)
	// while an AMI bump still ends within a maintenance window. It must
	// exceed every model pod's terminationGracePeriodSeconds (validate).
	nodeTerminationGrace = time.Hour
	// nodeExpireAfter is Karpenter's default lifetime (30 days), written
	// out: expiry ignores disruption budgets.
	nodeExpireAfter = 720 * time.Hour
	// modelGraceMargin is what a model pod's grace adds to its drain: 30 s
	// for the engine to exit once its streams are done.
	modelGraceMargin = 30
)

// The gateway's and the orchestrators' stop behind the NLB
// (platform.yaml.tmpl). Their target groups' deregistration delays in
// modules/eks-llm/edge.tf equal their graces, and a test there checks the
// relations with gateway.ShutdownBudget (38 s) and
// orchestrator.ShutdownGrace (30 s).
const (
	// LoadBalancerDrainSeconds is how long a stopping gateway or
	// orchestrator serves on, every connection old and new, with its
	// /healthz answering 503 (-drain-delay), before it closes its
	// listener: an NLB keeps opening connections to a deregistered target
	// for about 2 minutes, and to one that failed its health checks (two
	// 10 s checks) for some 30 s more. 120 s covers the slower path.
	LoadBalancerDrainSeconds = 120
	// GatewayGraceSeconds is the gateway pods' terminationGracePeriodSeconds:
	// the drain plus the gateway's shutdown budget (38 s), with 2 s for
	// the process to exit.
	GatewayGraceSeconds = 160
	// OrchestratorGraceSeconds is the orchestrator pods'
	// terminationGracePeriodSeconds: the drain plus the replica's shutdown
	// grace (30 s) and its servers' close (5 s), with 5 s to exit.
	OrchestratorGraceSeconds = 160
)

// dnsLabel is a Kubernetes name.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Render validates p, plans its models and fills every template:
// platform.yaml, karpenter.yaml and one model-<name>.yaml per model.
func Render(p Platform) ([]File, error) {
	p = withDefaults(p)
	plan, err := Plan(p)
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("").Option("missingkey=error").ParseFS(templates.FS, "*.yaml.tmpl")
	if err != nil {
		return nil, fmt.Errorf("parse templates: %w", err)
	}
	pls, err := pools(p, plan)
	if err != nil {
		return nil, err
	}
	pv := platformValues{Platform: p, Pools: pls, LargestModel: largest(plan), Dashboard: dashboard(p)}
	var files []File
	for _, t := range []string{"platform", "karpenter", "gpu", "observability"} {
		b, err := execute(tmpl, t, pv)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: t + ".yaml", Data: b})
	}
	for i, m := range p.Models {
		mv, err := valuesOf(p, i, m, plan)
		if err != nil {
			return nil, err
		}
		b, err := execute(tmpl, "model", mv)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: "model-" + m.Name + ".yaml", Data: b})
	}
	return files, nil
}

// Plan validates p and plans its models as Render deploys them: each
// workload with its model's spot declaration (`llmplat plan -f` prints it).
func Plan(p Platform) (capacity.Result, error) {
	p = withDefaults(p)
	if err := validate(p); err != nil {
		return capacity.Result{}, err
	}
	in, err := p.Plan.Input()
	if err != nil {
		return capacity.Result{}, fmt.Errorf("%w: plan: %w", ErrInvalid, err)
	}
	// Spot is the models' declaration (models[].spot), for the quota and
	// the spot pool's need.
	for _, m := range p.Models {
		in.Workloads[workloadOf(p, m.Name)].Spot = m.Spot
	}
	// Each workload is checked alone first, so a refusal names its field
	// (a model that does not fit its GPUs: plan.workloads[2]).
	for i, w := range in.Workloads {
		if err := w.WithDefaults().Validate(); err != nil {
			return capacity.Result{}, fmt.Errorf("%w: plan.workloads[%d]: %w", ErrInvalid, i, err)
		}
	}
	plan, err := capacity.Plan(in)
	if err != nil {
		return capacity.Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	// What it costs when idle: the floors on their nodes, and the AWS
	// layer (modules/eks-llm) at its defaults.
	idle, err := capacity.PlanIdle(in, capacity.DefaultEKSBase())
	if err != nil {
		return capacity.Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	plan.Idle = &idle
	return plan, nil
}

func execute(tmpl *template.Template, name string, v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, name+".yaml.tmpl", v); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

func withDefaults(p Platform) Platform {
	if p.DrainSeconds == 0 {
		p.DrainSeconds = 300
	}
	if p.Gateway.Replicas == 0 {
		p.Gateway.Replicas = 2
	}
	if p.Orchestrator.Replicas == 0 {
		p.Orchestrator.Replicas = 2
	}
	if p.GPUPool.AMIAlias == "" {
		p.GPUPool.AMIAlias = DefaultAMIAlias
	}
	return p
}

// proxySourcesErr checks gateway.proxy_protocol_from as the gateway's flag
// reads it, so a range the gateway would refuse fails the render instead.
func proxySourcesErr(p Platform) error {
	for _, c := range p.Gateway.ProxyProtocolFrom {
		if strings.Contains(c, ",") {
			return fmt.Errorf("%q is not one CIDR", c)
		}
	}
	_, err := proxyheader.ParsePrefixes(strings.Join(p.Gateway.ProxyProtocolFrom, ","))
	return err
}

// validate checks what the templates need, naming the field at fault.
func validate(p Platform) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
	}
	required := []struct{ field, value string }{
		{"cluster", p.Cluster}, {"node_role", p.NodeRole}, {"namespace", p.Namespace},
		{"images.engine", p.Images.Engine}, {"images.platform", p.Images.Platform}, {"images.device_plugin", p.Images.DevicePlugin},
		{"model_cache.bucket", p.ModelCache.Bucket}, {"model_cache.region", p.ModelCache.Region},
		{"prometheus_url", p.PrometheusURL},
		{"gpu_pool.gpu", p.GPUPool.GPU}, {"gpu_pool.family", p.GPUPool.Family},
	}
	for _, r := range required {
		if r.value == "" {
			return bad(r.field, "required")
		}
	}
	switch {
	case !dnsLabel.MatchString(p.Namespace):
		return bad("namespace", "%q is not a Kubernetes name", p.Namespace)
	case !dnsLabel.MatchString(p.GPUPool.GPU):
		return bad("gpu_pool.gpu", "%q is not a Kubernetes name", p.GPUPool.GPU)
	case p.GPUPool.GPULimit <= 0:
		return bad("gpu_pool.gpu_limit", "must be positive, got %d", p.GPUPool.GPULimit)
	case !PinnedByDigest(p.Images.Engine):
		return bad("images.engine", "%q is not pinned by digest (<repository>@sha256:<64 hex digits>): a tag names whatever was pushed to it last, so a GPU node that pulls it later may run another engine; copy the image into your account's ECR and name it by the digest the copy prints (docs/deploy-eks.md)", p.Images.Engine)
	case !amiAlias.MatchString(p.GPUPool.AMIAlias):
		return bad("gpu_pool.ami_alias", "%q is not a pinned AL2023 release (al2023@vYYYYMMDD): with @latest every new AMI replaces every GPU node", p.GPUPool.AMIAlias)
	case p.Gateway.Replicas < 0:
		return bad("gateway.replicas", "must not be negative")
	case proxySourcesErr(p) != nil:
		return bad("gateway.proxy_protocol_from", "%v", proxySourcesErr(p))
	case p.Orchestrator.Replicas < 0:
		return bad("orchestrator.replicas", "must not be negative")
	case p.DrainSeconds < 0:
		return bad("drain_seconds", "must not be negative")
	case time.Duration(p.DrainSeconds+modelGraceMargin)*time.Second >= nodeTerminationGrace:
		return bad("drain_seconds", "%d s leaves a model pod no full drain within a GPU node's %s terminationGracePeriod", p.DrainSeconds, nodeTerminationGrace)
	case len(p.Models) == 0:
		return bad("models", "at least one model is required")
	}
	var seen []string
	for i, m := range p.Models {
		at := fmt.Sprintf("models[%d]", i)
		switch {
		case !dnsLabel.MatchString(m.Name):
			return bad(at+".name", "%q is not a Kubernetes name", m.Name)
		case slices.Contains(seen, m.Name):
			return bad(at+".name", "%q is listed twice", m.Name)
		case m.Revision == "":
			return bad(at+".revision", "required")
		case m.Warm != nil && (m.Warm.Timezone == "" || m.Warm.Start == "" || m.Warm.End == ""):
			return bad(at+".warm", "timezone, start and end are required")
		}
		seen = append(seen, m.Name)
		w := workloadOf(p, m.Name)
		if w < 0 {
			return bad(at+".name", "no workload for %q under plan.workloads", m.Name)
		}
		ws := p.Plan.Workloads[w]
		wat := fmt.Sprintf("plan.workloads[%d]", w)
		switch {
		case ws.MinReplicas < 0:
			return bad(wat+".min_replicas", "must not be negative, got %d", ws.MinReplicas)
		case ws.MaxReplicas <= 0:
			return bad(wat+".max_replicas", "must be positive, got %d", ws.MaxReplicas)
		case ws.MinReplicas > ws.MaxReplicas:
			return bad(wat+".min_replicas", "%d is above max_replicas %d", ws.MinReplicas, ws.MaxReplicas)
		case m.Spot && ws.MinReplicas == ws.MaxReplicas:
			return bad(at+".spot", errSpotNoRoom)
		case ws.Spot:
			return bad(wat+".spot", "declare spot under models[%d].spot, the one place a platform says it", i)
		}
		if _, ok := capacity.LookupGPU(ws.GPU); !ok && !slices.ContainsFunc(p.Plan.GPUs, func(g capacity.GPUSpec) bool { return g.Name == ws.GPU }) {
			return bad(wat+".gpu", "unknown GPU profile %q", ws.GPU)
		}
	}
	return nil
}

// workloadOf returns the index of the model's workload in the plan, or -1.
func workloadOf(p Platform, model string) int {
	return slices.IndexFunc(p.Plan.Workloads, func(w capacity.WorkloadSpec) bool { return w.Model == model })
}

// pool is one Karpenter NodePool.
type pool struct {
	Name, Family, CapacityType string
	GPULimit                   int
}

// pools is the on-demand and the spot NodePool, each limited to the GPUs
// of the nodes its models may run on it (poolNeeds): a pool's cap is a cap
// on spend, and one above what may run there only lets a runaway buy
// more. gpu_pool.gpu_limit bounds both: a need above it is refused, since
// KEDA would scale to replicas Karpenter refuses to buy nodes for.
func pools(p Platform, plan capacity.Result) ([]pool, error) {
	onDemand, spot, err := poolNeeds(p, plan)
	if err != nil {
		return nil, err
	}
	if need := max(onDemand, spot); p.GPUPool.GPULimit < need {
		return nil, fmt.Errorf("%w: gpu_pool.gpu_limit: %d is below the %d GPUs the on-demand pool needs (and %d the spot pool) "+
			"with every model at max_replicas, each replica on its own smallest %s node: "+
			"raise it to %d or lower max_replicas (llmplat plan shows the nodes per model)",
			ErrInvalid, p.GPUPool.GPULimit, onDemand, spot, p.GPUPool.Family, need)
	}
	base := "gpu-" + p.GPUPool.GPU
	ps := []pool{{Name: base, Family: p.GPUPool.Family, CapacityType: "on-demand", GPULimit: onDemand}}
	if spot > 0 {
		ps = append(ps, pool{Name: base + "-spot", Family: p.GPUPool.Family, CapacityType: "spot", GPULimit: spot})
	}
	return ps, nil
}

// poolNeeds is the nvidia.com/gpu the on-demand and the spot pool must be
// allowed: Karpenter's limit counts the GPUs of the nodes it launches, not
// of the pods, so each replica counts the GPUs of the smallest node that
// holds it (a TP-2 replica buys a 4-GPU g6e.12xlarge when it arrives
// alone). Every model may run all of its max_replicas on demand (a spot
// model's scaled replicas fall back there when spot is short); a model
// allowed on spot keeps its floor on demand, so only its max_replicas −
// min_replicas may run on spot. The reference workload: 8 × 1 + 5 × 4 +
// 3 × 4 = 40 on demand, (8 − 2) × 1 = 6 on spot. It also refuses a model
// whose GPU the pool's family does not carry.
func poolNeeds(p Platform, plan capacity.Result) (onDemand, spot int, err error) {
	for i, m := range p.Models {
		k := slices.IndexFunc(plan.Quota.Models, func(q capacity.ModelQuota) bool { return q.Model == m.Name })
		w := workloadOf(p, m.Name)
		ws := p.Plan.Workloads[w]
		in, ierr := capacity.SmallestInstance(ws.GPU, plan.Models[k].Replicas.GPUsPerReplica)
		switch {
		case ierr != nil:
			return 0, 0, fmt.Errorf("%w: plan.workloads[%d].gpu: %w", ErrInvalid, w, ierr)
		case in.Family != p.GPUPool.Family:
			return 0, 0, fmt.Errorf("%w: models[%d]: %s runs on %s, which the pool's family %s does not carry (%s does)",
				ErrInvalid, i, m.Name, ws.GPU, p.GPUPool.Family, in.Family)
		}
		onDemand += plan.Quota.Models[k].NodeGPUs
		if m.Spot {
			spot += (ws.MaxReplicas - ws.MinReplicas) * in.GPUs
		}
	}
	return onDemand, spot, nil
}

// platformValues fill platform.yaml.tmpl, karpenter.yaml.tmpl,
// gpu.yaml.tmpl and observability.yaml.tmpl.
type platformValues struct {
	Platform
	Pools []pool
	// LargestModel is the model with the most GPUs a replica: the pool an
	// idle alert watches.
	LargestModel string
	// Dashboard is the Grafana dashboard, as one line of JSON.
	Dashboard string
}

// modelFloor is a model's replica floor, for its availability alerts.
type modelFloor struct {
	Name string
	Min  int
}

// ModelFloors lists each model with its min_replicas.
func (v platformValues) ModelFloors() []modelFloor {
	out := make([]modelFloor, 0, len(v.Models))
	for _, m := range v.Models {
		out = append(out, modelFloor{Name: m.Name, Min: v.Plan.Workloads[workloadOf(v.Platform, m.Name)].MinReplicas})
	}
	return out
}

// karpenterDuration spells d as Karpenter's durations are written: whole
// hours as "1h", else minutes ("90m").
func karpenterDuration(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dm", d/time.Minute)
}

// largest returns the planned model with the most GPUs per replica.
func largest(plan capacity.Result) string {
	name, gpus := "", 0
	for _, mp := range plan.Models {
		if mp.Flags.TensorParallelSize > gpus {
			name, gpus = mp.Model, mp.Flags.TensorParallelSize
		}
	}
	return name
}

func (v platformValues) GatewayReplicas() int          { return v.Gateway.Replicas }
func (v platformValues) NodeTerminationGrace() string  { return karpenterDuration(nodeTerminationGrace) }
func (v platformValues) NodeExpireAfter() string       { return karpenterDuration(nodeExpireAfter) }
func (v platformValues) OrchestratorReplicas() int     { return v.Orchestrator.Replicas }
func (v platformValues) PlatformImage() string         { return v.Images.Platform }
func (v platformValues) LoadBalancerDrainSeconds() int { return LoadBalancerDrainSeconds }
func (v platformValues) GatewayGraceSeconds() int      { return GatewayGraceSeconds }
func (v platformValues) OrchestratorGraceSeconds() int { return OrchestratorGraceSeconds }

// GatewayProxyProtocolFrom is the gateway's -proxy-protocol-from: the
// load balancer's subnets, comma-separated; empty omits the flag.
func (v platformValues) GatewayProxyProtocolFrom() string {
	return strings.Join(v.Gateway.ProxyProtocolFrom, ",")
}

// modelValues fill model.yaml.tmpl.
type modelValues struct {
	Name, ServedName, Revision, Namespace string
	EngineImage, PlatformImage            string
	Bucket, Region                        string
	PrometheusURL                         string
	Flags                                 capacity.VLLMFlags
	KVCapacityTokens                      int64
	// MinReplicas and MaxReplicas bound the ScaledObject's Deployment: the
	// workload's bounds less the on-demand floor of a spot model.
	MinReplicas, MaxReplicas int
	// SingleReplica is true when the model may run one replica (its floor
	// is below 2): its PodDisruptionBudget then keeps one available, and
	// its ScaledObject surges on a stranded replica (StrandedQuery).
	SingleReplica bool
	// Floor is a spot model's on-demand floor, a Deployment of its own; 0
	// when the scaled Deployment holds every replica.
	Floor             int
	WaitingPerReplica int
	// PlannedStreams is the batch a replica is planned to run (the
	// capacity plan's streams per replica): the demand trigger's target.
	PlannedStreams             int
	NodePools                  []string
	Spot                       bool
	Warm                       *Warm
	DrainSeconds, GraceSeconds int
	DrainSettleSeconds         int
	CacheHostPath              string
	StartupChecks              int
	ShmSize                    string
	// Resources is the engine's CPU and memory request (and memory limit).
	Resources capacity.Resources
	// ExpectedLoadSeconds is a cold start from zero (the model-spec
	// annotation's expected-load); ScaleDownWindowSeconds the HPA's
	// scale-down stabilisation, at least that (wake.go).
	ExpectedLoadSeconds, ScaleDownWindowSeconds int
	// ProgressDeadlineSeconds bounds a rollout's wait for its next
	// replica: two cold starts (wake.go).
	ProgressDeadlineSeconds int
	// Deployments are the model's engines: the one the ScaledObject
	// scales, and for a spot model its on-demand floor.
	Deployments []deploymentValues
}

// strandedGauge is the orchestrators' count of a model's last ready
// replicas on Nodes being disrupted (clusterwatch.StrandedDesc).
const strandedGauge = "llmplat_model_stranded_replicas"

// FallbackReplicas is the ScaledObject's fallback while its scalers fail
// (Prometheus down): the Deployment's minimum, at least one, so that a
// model whose replicas run keeps one while the autoscaler is blind.
func (v modelValues) FallbackReplicas() int { return max(v.MinReplicas, 1) }

// StrandedQuery is the replica count the ScaledObject's stranded trigger
// asks for (an AverageValue of 1): with S the stranded replicas, S + 1
// when the scaled Deployment holds them all (one more than it runs), S
// when they are (or include) an on-demand floor's, whose surge is the
// scaled Deployment's own; 0 when S is.
func (v modelValues) StrandedQuery() string {
	s := fmt.Sprintf(`max(%s{model="%s"})`, strandedGauge, v.Name)
	if v.Floor > 0 {
		return s
	}
	return fmt.Sprintf("%s + clamp_max(%s, 1)", s, s)
}

// The demand forecast's regression: the last five minutes of the model's
// streams, sampled every 15 s (the ScaledObject's pollingInterval, and
// production's scrape interval).
const (
	forecastWindowSeconds = 300
	forecastStepSeconds   = 15
)

// DemandQuery is the streams the ScaledObject's demand trigger sizes the
// model for, an AverageValue of PlannedStreams per replica: the streams
// its engines run and hold waiting now, plus their growth over the last
// forecastWindowSeconds (a least-squares slope, never below 0) carried
// over a cold start and a poll — the streams the model will have when a
// replica asked for now is Ready. Sized for now alone, a replica comes a
// cold start late: the twin's reference ramp outgrew the floors while
// KEDA's first replica loaded, and callers waited out the queue limit.
// A spot model's on-demand floor serves its planned share outside the
// scaled Deployment, so that share is taken off (never below 0).
func (v modelValues) DemandQuery() string {
	sel := fmt.Sprintf(`{model_name="%s"}`, v.ServedName)
	now := fmt.Sprintf("(sum(vllm:num_requests_running%s) + sum(vllm:num_requests_waiting%s))", sel, sel)
	q := fmt.Sprintf("%s + clamp_min(deriv(%s[%ds:%ds]), 0) * %d", now, now,
		forecastWindowSeconds, forecastStepSeconds, v.ExpectedLoadSeconds+forecastStepSeconds)
	if v.Floor > 0 {
		return fmt.Sprintf("clamp_min(%s - %d, 0)", q, v.Floor*v.PlannedStreams)
	}
	return q
}

// deploymentValues fill one of a model's Deployments.
type deploymentValues struct {
	modelValues
	DeploymentName string
	// Role is the llmplat.io/replicas label that keeps the selectors of
	// a model's Deployments apart: "scaled" or "on-demand-floor".
	Role string
	// Replicas is a fixed count (the floor); 0 leaves it to the HPA.
	Replicas int
	// PreferSpot asks for spot nodes first (a spot model's scaled part).
	PreferSpot bool
}

// cacheHostPath is the model cache on a GPU node: under the mount of the
// instance store's RAID0 array, which the AL2023 AMI sets up at
// /mnt/k8s-disks/0 for instanceStorePolicy: RAID0 (the root volume is EBS).
const cacheHostPath = "/mnt/k8s-disks/0/llmplat-models"

// drainSettleSeconds is how long an engine's preStop waits before reading
// its own gauges: 5 s lets the node agent's drain reach the orchestrators
// and an assignment already on its way reach the engine.
const drainSettleSeconds = 5

// valuesOf is model m's values, its engine flags from the plan.
func valuesOf(p Platform, i int, m Model, plan capacity.Result) (modelValues, error) {
	k := slices.IndexFunc(plan.Models, func(mp capacity.ModelPlan) bool { return mp.Model == m.Name })
	if k < 0 {
		return modelValues{}, fmt.Errorf("%w: models[%d].name: the plan has no %q", ErrInvalid, i, m.Name)
	}
	mp := plan.Models[k]
	if err := fits(mp); err != nil {
		return modelValues{}, fmt.Errorf("%w: models[%d]: %w", ErrInvalid, i, err)
	}
	ws := p.Plan.Workloads[workloadOf(p, m.Name)]
	d := ModelDeployment{Name: m.Name, ServedName: mp.ServedName, Revision: m.Revision, Namespace: p.Namespace,
		EngineImage: p.Images.Engine, PlatformImage: p.Images.Platform,
		Bucket: p.ModelCache.Bucket, Region: p.ModelCache.Region, PrometheusURL: p.PrometheusURL,
		NodePool: "gpu-" + p.GPUPool.GPU, Spot: m.Spot, Warm: m.Warm,
		MinReplicas: ws.MinReplicas, MaxReplicas: ws.MaxReplicas, DrainSeconds: p.DrainSeconds}
	v, err := d.values(mp)
	if err != nil {
		return modelValues{}, fmt.Errorf("%w: models[%d]: %w", ErrInvalid, i, err)
	}
	return v, nil
}
