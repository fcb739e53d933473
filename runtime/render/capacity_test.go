package render

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// TestPoolLimitHoldsTheModelsCaps: each NodePool's GPU limit is the GPUs
// of the nodes its models may run on it at max_replicas, no more (a cap
// on spend): 40 on demand for the reference workload (every model at its
// cap, the 32B's and 70B's replicas each buying a 4-GPU g6e.12xlarge), 6
// on spot (the 8B above its on-demand floor of 2). A platform without a
// spot model has no spot pool. A gpu_limit below a pool's need, or a model
// bound to a family that lacks its GPU, is refused with the need named.
func TestPoolLimitHoldsTheModelsCaps(t *testing.T) {
	limitsOf := func(t *testing.T, p Platform) map[string]int {
		t.Helper()
		files, err := Render(p)
		if err != nil {
			t.Fatal(err)
		}
		limits := map[string]int{}
		for _, f := range files {
			if f.Name != "karpenter.yaml" {
				continue
			}
			for _, d := range docs(t, f) {
				if d["kind"] == "NodePool" {
					limits[dig(t, d, "metadata", "name").(string)] = dig(t, d, "spec", "limits", "nvidia.com/gpu").(int)
				}
			}
		}
		return limits
	}
	pools := []struct {
		name string
		edit func(*Platform)
		want map[string]int
	}{
		{"the reference workload", func(*Platform) {}, map[string]int{"gpu-l40s": 8*1 + 5*4 + 3*4, "gpu-l40s-spot": (8 - 2) * 1}},
		{"a higher floor leaves spot less", func(p *Platform) { p.Plan.Workloads[0].MinReplicas = 5 },
			map[string]int{"gpu-l40s": 40, "gpu-l40s-spot": (8 - 5) * 1}},
		{"a TP-2 model on spot buys 4-GPU nodes there", func(p *Platform) { p.Models[1].Spot = true },
			map[string]int{"gpu-l40s": 40, "gpu-l40s-spot": 6 + (5-1)*4}},
		{"no model on spot, no spot pool", func(p *Platform) { p.Models[0].Spot = false }, map[string]int{"gpu-l40s": 40}},
		{"a gpu_limit above the needs caps neither pool higher", func(p *Platform) { p.GPUPool.GPULimit = 64 },
			map[string]int{"gpu-l40s": 40, "gpu-l40s-spot": 6}},
	}
	for _, tt := range pools {
		t.Run(tt.name, func(t *testing.T) {
			p := example(t)
			tt.edit(&p)
			if got := limitsOf(t, p); !maps.Equal(got, tt.want) {
				t.Errorf("NodePool GPU limits %v, want %v: what the models may run on each pool", got, tt.want)
			}
		})
	}

	tests := []struct {
		name string
		edit func(*Platform)
		want string
	}{
		{"limit below the on-demand need", func(p *Platform) { p.GPUPool.GPULimit = 39 }, "gpu_pool.gpu_limit: 39 is below the 40 GPUs"},
		{"the old limit of 16", func(p *Platform) { p.GPUPool.GPULimit = 16 }, "raise it to 40"},
		{"a cap raised past the limit", func(p *Platform) { p.GPUPool.GPULimit = 40; p.Plan.Workloads[1].MaxReplicas = 6 }, "below the 44 GPUs"},
		{"a GPU the family lacks", func(p *Platform) { p.GPUPool.Family = "g5" }, "does not carry"},
		{"spot declared twice", func(p *Platform) { p.Plan.Workloads[0].Spot = true }, "plan.workloads[0].spot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := example(t)
			tt.edit(&p)
			_, err := Render(p)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Render = %v, want ErrInvalid saying %q", err, tt.want)
			}
		})
	}
}

// TestEngineRequestsCPUAndMemory: every engine requests CPU and memory,
// its GPUs' share of the smallest instance that holds it, with a memory
// limit equal to the request and no CPU limit (QoS class Burstable), so it
// is never BestEffort and fits the node Karpenter buys for its GPUs.
func TestEngineRequestsCPUAndMemory(t *testing.T) {
	p := example(t)
	files, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range p.Models {
		t.Run(m.Name, func(t *testing.T) {
			ws := p.Plan.Workloads[workloadOf(p, m.Name)]
			want, err := capacity.ReplicaResources(ws.GPU, ws.TensorParallelSize)
			if err != nil {
				t.Fatal(err)
			}
			d := modelDoc(t, files, p.Models[i].Name, "Deployment")
			c := dig(t, d, "spec", "template", "spec", "containers", 0)
			if got := dig(t, c, "name"); got != "vllm" {
				t.Fatalf("first container %v, want vllm", got)
			}
			req := dig(t, c, "resources", "requests").(map[string]any)
			lim := dig(t, c, "resources", "limits").(map[string]any)
			wantCPU, wantMem := itoa(want.CPUMillis)+"m", itoa(want.MemoryMiB)+"Mi"
			if req["cpu"] != wantCPU || req["memory"] != wantMem {
				t.Errorf("requests cpu %v memory %v, want %s and %s", req["cpu"], req["memory"], wantCPU, wantMem)
			}
			if lim["memory"] != wantMem {
				t.Errorf("memory limit %v, want the request %s", lim["memory"], wantMem)
			}
			if _, ok := lim["cpu"]; ok {
				t.Errorf("cpu limit %v: want none (CFS would throttle the engine at its request)", lim["cpu"])
			}
			if got := qosClass(c); got != "Burstable" {
				t.Errorf("QoS class %s, want Burstable", got)
			}
		})
	}
}

// qosClass is Kubernetes' QoS class of a pod whose only container with
// resources is c: Guaranteed when CPU and memory limits equal their
// requests, BestEffort with no CPU or memory request or limit, Burstable
// otherwise.
func qosClass(c any) string {
	cm, _ := c.(map[string]any)
	res, _ := cm["resources"].(map[string]any)
	req, _ := res["requests"].(map[string]any)
	lim, _ := res["limits"].(map[string]any)
	if req["cpu"] == nil && req["memory"] == nil && lim["cpu"] == nil && lim["memory"] == nil {
		return "BestEffort"
	}
	if lim["cpu"] != nil && lim["memory"] != nil && (req["cpu"] == nil || req["cpu"] == lim["cpu"]) &&
		(req["memory"] == nil || req["memory"] == lim["memory"]) {
		return "Guaranteed"
	}
	return "Burstable"
}

// TestDaemonSetsFitTheirBudget: the DaemonSets llmplat render puts on the
// GPU nodes request no more CPU and memory than the budget the engines'
// requests leave for them (capacity.DaemonSetCPUMillis and
// DaemonSetMemoryMiB), so raising a DaemonSet's requests past it fails
// here rather than leaving an engine Pending on a node that looked big
// enough.
func TestDaemonSetsFitTheirBudget(t *testing.T) {
	files, err := Render(example(t))
	if err != nil {
		t.Fatal(err)
	}
	var cpu, mem resource.Quantity
	found := 0
	for _, f := range files {
		for _, d := range docs(t, f) {
			if d["kind"] != "DaemonSet" {
				continue
			}
			found++
			for _, c := range dig(t, d, "spec", "template", "spec", "containers").([]any) {
				res, _ := c.(map[string]any)["resources"].(map[string]any)
				req, _ := res["requests"].(map[string]any)
				for name, sum := range map[string]*resource.Quantity{"cpu": &cpu, "memory": &mem} {
					if v, ok := req[name]; ok {
						sum.Add(resource.MustParse(fmt.Sprint(v)))
					}
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("no DaemonSet rendered: the check would pass vacuously")
	}
	if cpu.MilliValue() > capacity.DaemonSetCPUMillis || mem.Value() > capacity.DaemonSetMemoryMiB<<20 {
		t.Errorf("the GPU nodes' DaemonSets request %s CPU and %s memory, above the %dm and %dMi budget the engines leave them",
			cpu.String(), mem.String(), capacity.DaemonSetCPUMillis, capacity.DaemonSetMemoryMiB)
	}
}
