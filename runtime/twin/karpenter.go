package twin

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// KarpenterModule is the module whose kwok provider (its kwok folder)
// the twin runs, and whose CRDs it installs: the production version.
const KarpenterModule = "sigs.k8s.io/karpenter@v1.10.0"

// karpenterCRDs are the module's CRDs the kwok provider needs, as its
// chart installs them: NodePool, NodeClaim, NodeOverlay and KWOKNodeClass.
var karpenterCRDs = []string{"kwok/charts/crds", "kwok/apis/crds"}

// Karpenter's settings the twin scales by Cluster.Scale, with their
// defaults (real-world durations).
const (
	// batchMaxDuration and batchIdleDuration are Karpenter's provisioning
	// batch window (BATCH_MAX_DURATION, BATCH_IDLE_DURATION): pending pods
	// that arrive within the idle gap of each other, up to the max, are
	// packed onto nodes together.
	batchMaxDuration  = 10 * time.Second
	batchIdleDuration = time.Second
	// minBatchWindow floors a scaled batch window: the twin's controllers
	// create a burst's pods within milliseconds, and a window shorter than
	// the API server's round trip would split one burst into many nodes.
	minBatchWindow = 100 * time.Millisecond
)

// Karpenter's timings that no setting reaches, so the twin cannot scale
// them (real seconds in the twin as in production; a scenario reads them
// as such): the disruption controller's poll (10 s) and its
// consolidation validation (15 s) before an empty node is removed, a
// terminating node's minimum drain (5 s) and the eviction queue's retry
// (up to 10 s). NodePool disruption settings (consolidateAfter, budgets,
// expireAfter, terminationGracePeriod) are in the NodePool and are scaled
// where the twin substitutes them.

// karpenterReady bounds the wait for Karpenter's health probe: the
// operator starts its informers and takes its Lease first.
const karpenterReady = 2 * time.Minute

// Instance-type prices. The planner prices a GPU by the hour
// (capacity.GPU.PricePerHour) and buys, for a replica, the family's
// smallest shape that holds its GPUs (capacity.SmallestInstance); the
// kwok provider launches the cheapest offering that fits. So a shape costs
// its GPUs at the planner's price plus a small share per vCPU, making the
// smallest shape that fits the cheapest, as on AWS.
const (
	// vcpuHourUSD is that share: a cent per vCPU-hour, far below a GPU's.
	vcpuHourUSD = 0.01
	// spotPriceShare is spot's price as a share of on-demand: spot must
	// be cheaper for Karpenter to prefer it, as EC2's price-capacity-
	// optimized allocation does; 40 % is an indicative g6e discount.
	spotPriceShare = 0.4
)

// twinZones are the zones every instance type is offered in, one
// region's three.
var twinZones = []string{"twin-a", "twin-b", "twin-c"}

// Labels the kwok provider's nodes carry besides its own: the rendered
// NodePools select the family by the AWS provider's label, so every
// offering carries it (and the node gets it).
const awsFamilyLabel = "karpenter.k8s.aws/instance-family"

// kwokInstanceType is an entry of the kwok provider's instance-types
// file (its cloudprovider.InstanceTypeOptions).
type kwokInstanceType struct {
	Name             string              `json:"name"`
	Offerings        []kwokOffering      `json:"offerings"`
	Architecture     string              `json:"architecture"`
	OperatingSystems []string            `json:"operatingSystems"`
	Resources        corev1.ResourceList `json:"resources"`
}

// kwokOffering is one offering of a kwok instance type: where and how it
// is bought, and its price (field names as the provider reads them).
type kwokOffering struct {
	Price        float64                          `json:"Price"`
	Available    bool                             `json:"Available"`
	Requirements []corev1.NodeSelectorRequirement `json:"Requirements"`
}

// GPUResource is the extended resource a GPU node offers and an engine
// pod requests.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// kwokOverheadCPU and kwokOverheadMemory are what the kwok provider keeps
// of every instance type (its fixed kube-reserved): added to the capacity
// it is given, so a node's allocatable is what the planner assumes.
var (
	kwokOverheadCPU    = resource.MustParse("100m")
	kwokOverheadMemory = resource.MustParse("10Mi")
)

// InstanceTypes is the kwok provider's instance-types file for the shapes
// of instances: each with its GPUs (GPUResource), and the allocatable CPU
// and memory Karpenter on AWS would give it (capacity.Instance, before
// the DaemonSets' budget: the twin runs no DaemonSets), on-demand and
// spot in every zone.
func InstanceTypes(instances []capacity.Instance) ([]byte, error) {
	var out []kwokInstanceType
	for _, in := range instances {
		gpu, ok := capacity.LookupGPU(in.GPU)
		if !ok {
			return nil, fmt.Errorf("instance %s: unknown GPU %q", in.Type, in.GPU)
		}
		onDemand := float64(in.GPUs)*gpu.PricePerHour + float64(in.VCPUs)*vcpuHourUSD
		a := in.Allocatable()
		cpu := resource.NewMilliQuantity(a.CPUMillis+capacity.DaemonSetCPUMillis, resource.DecimalSI)
		cpu.Add(kwokOverheadCPU)
		mem := resource.NewQuantity((a.MemoryMiB+capacity.DaemonSetMemoryMiB)<<20, resource.BinarySI)
		mem.Add(kwokOverheadMemory)
		it := kwokInstanceType{
			Name: in.Type, Architecture: "amd64", OperatingSystems: []string{"linux"},
			Resources: corev1.ResourceList{
				corev1.ResourceCPU:    *cpu,
				corev1.ResourceMemory: *mem,
				corev1.ResourcePods:   *resource.NewQuantity(capacity.ReservedForPods, resource.DecimalSI),
				GPUResource:           *resource.NewQuantity(int64(in.GPUs), resource.DecimalSI),
			},
		}
		for _, ct := range []struct {
			name  string
			price float64
		}{{"on-demand", onDemand}, {"spot", onDemand * spotPriceShare}} {
			for _, z := range twinZones {
				it.Offerings = append(it.Offerings, kwokOffering{
					Price: math.Round(ct.price*1e4) / 1e4, Available: true,
					Requirements: []corev1.NodeSelectorRequirement{
						{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{ct.name}},
						{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{z}},
						{Key: awsFamilyLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{in.Family}},
					},
				})
			}
		}
		out = append(out, it)
	}
	return json.MarshalIndent(out, "", "  ")
}

// StartKarpenter installs Karpenter's CRDs and runs its kwok provider
// against the twin's API server, offering instances (InstanceTypes).
// Leader election takes a Lease in kube-system; metrics and health listen
// on free ports of the twin's namespace.
func (c *Cluster) StartKarpenter(tb testing.TB, instances []capacity.Instance) {
	tb.Helper()
	if !c.HasBin(tb, "karpenter-kwok") {
		return
	}
	mod := moduleDir(tb, KarpenterModule)
	var crdDirs []string
	for _, d := range karpenterCRDs {
		crdDirs = append(crdDirs, filepath.Join(mod, d))
	}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{
		Paths: crdDirs, ErrorIfPathMissing: true, MaxTime: karpenterReady}); err != nil {
		tb.Fatalf("twin: install Karpenter's CRDs: %v", err)
	}
	types, err := InstanceTypes(instances)
	if err != nil {
		tb.Fatalf("twin: instance types: %v", err)
	}
	typesPath := filepath.Join(c.Dir, "instance-types.json")
	if err := os.WriteFile(typesPath, types, 0o600); err != nil {
		tb.Fatalf("twin: write instance types: %v", err)
	}
	metrics, health := freePort(tb), freePort(tb)
	p := c.Start(tb, "karpenter", c.Bin("karpenter-kwok"), []string{
		"--instance-types-file-path=" + typesPath,
		"--leader-election-namespace=kube-system",
		"--metrics-port=" + strconv.Itoa(metrics),
		"--health-probe-port=" + strconv.Itoa(health),
		"--batch-max-duration=" + max(c.Dur(batchMaxDuration), minBatchWindow).String(),
		"--batch-idle-duration=" + max(c.Dur(batchIdleDuration), minBatchWindow).String(),
		"--log-level=debug",
	}, "KUBECONFIG="+c.Kubeconfig)
	p.waitAlive(tb, karpenterReady, "a ready answer on its health port", func(ctx context.Context) error {
		return httpGetOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
	})
}
