package capacity_test

import (
	"errors"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// TestSmallestInstance checks the shape a replica of tp GPUs gets: the
// reference workload's 32B and 70B need the 4-GPU g6e.12xlarge, as no g6e has 2 GPUs.
func TestSmallestInstance(t *testing.T) {
	tests := []struct {
		name     string
		gpu      string
		tp       int
		want     string
		wantCPUs int
	}{
		{"8B on one L40S", "L40S", 1, "g6e.xlarge", 4},
		{"32B on two L40S", "L40S", 2, "g6e.12xlarge", 48},
		{"70B on four L40S", "L40S", 4, "g6e.12xlarge", 48},
		{"eight L40S", "L40S", 8, "g6e.48xlarge", 192},
		{"one A10G", "A10G", 1, "g5.xlarge", 4},
		{"eight H100", "H100-SXM", 8, "p5.48xlarge", 192},
		{"one H200", "H200", 1, "p5en.48xlarge", 192},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := capacity.SmallestInstance(tt.gpu, tt.tp)
			if err != nil {
				t.Fatalf("SmallestInstance(%s, %d): %v", tt.gpu, tt.tp, err)
			}
			if got.Type != tt.want || got.VCPUs != tt.wantCPUs {
				t.Errorf("SmallestInstance(%s, %d) = %s (%d vCPUs), want %s (%d)", tt.gpu, tt.tp, got.Type, got.VCPUs, tt.want, tt.wantCPUs)
			}
		})
	}
}

// TestSmallestInstanceRefuses checks that a replica no shape holds is an
// error, not a guess.
func TestSmallestInstanceRefuses(t *testing.T) {
	for _, c := range []struct {
		gpu string
		tp  int
	}{{"L40S", 16}, {"H200", 16}, {"custom", 1}} {
		if _, err := capacity.SmallestInstance(c.gpu, c.tp); !errors.Is(err, capacity.ErrNoInstance) {
			t.Errorf("SmallestInstance(%s, %d) error = %v, want ErrNoInstance", c.gpu, c.tp, err)
		}
	}
}

// TestReplicaResourcesFitEveryShape checks that the requests of a replica
// leave room for the node's own reserve on every shape that can hold it:
// a node holds as many replicas as it has GPUs for, by CPU and by memory,
// so no replica waits for a bigger node than the GPUs ask for.
func TestReplicaResourcesFitEveryShape(t *testing.T) {
	for _, gpu := range []string{"L40S", "A10G", "H100-SXM", "H200"} {
		for _, tp := range []int{1, 2, 4, 8} {
			r, err := capacity.ReplicaResources(gpu, tp)
			if errors.Is(err, capacity.ErrNoInstance) {
				continue // no shape of the GPU holds tp (tested above)
			}
			if err != nil {
				t.Fatalf("ReplicaResources(%s, %d): %v", gpu, tp, err)
			}
			if r.CPUMillis <= 0 || r.MemoryMiB <= 0 {
				t.Fatalf("ReplicaResources(%s, %d) = %+v, want positive requests", gpu, tp, r)
			}
			for _, in := range capacity.Instances() {
				if in.GPU != gpu || in.GPUs < tp {
					continue
				}
				n := int64(in.GPUs / tp)
				a := in.Allocatable()
				if n*r.CPUMillis > a.CPUMillis || n*r.MemoryMiB > a.MemoryMiB {
					t.Errorf("%d replicas of %d × %s request %d m CPU and %d MiB; %s allocates %d m and %d MiB",
						n, tp, gpu, n*r.CPUMillis, n*r.MemoryMiB, in.Type, a.CPUMillis, a.MemoryMiB)
				}
			}
		}
	}
}

// TestReplicaResourcesReference pins the reference workload's requests: the figures the guide
// and docs/kubernetes.md quote.
func TestReplicaResourcesReference(t *testing.T) {
	tests := []struct {
		name string
		tp   int
		want capacity.Resources
	}{
		{"8B", 1, capacity.Resources{CPUMillis: 3100, MemoryMiB: 19 * 1024}},
		{"32B", 2, capacity.Resources{CPUMillis: 23500, MemoryMiB: 172 * 1024}},
		{"70B", 4, capacity.Resources{CPUMillis: 47000, MemoryMiB: 345 * 1024}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := capacity.ReplicaResources("L40S", tt.tp)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ReplicaResources(L40S, %d) = %+v, want %+v", tt.tp, got, tt.want)
			}
		})
	}
}

// TestKubeReservedCPU checks the EKS formula at a few core counts.
func TestKubeReservedCPU(t *testing.T) {
	for _, c := range []struct {
		vcpus int
		want  float64
	}{{1, 60}, {2, 70}, {4, 80}, {48, 190}, {192, 550}} {
		if got := capacity.KubeReservedCPUMillis(c.vcpus); got != c.want {
			t.Errorf("KubeReservedCPUMillis(%d) = %g, want %g", c.vcpus, got, c.want)
		}
	}
}

// TestReferenceQuota checks the vCPU quota of the reference workload's plan: every replica
// up to max_replicas on its smallest shape, the spot-allowed 8B in both
// quotas. The guide quotes these figures.
func TestReferenceQuota(t *testing.T) {
	res, err := capacity.Plan(capacity.ReferenceInput())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, q := range res.Quota.Quotas {
		got[q.Name] = q.VCPUs
	}
	want := map[string]int{
		"Running On-Demand G and VT instances": 8*4 + 5*48 + 3*48,
		"All G and VT Spot Instance Requests":  8 * 4,
	}
	if len(got) != len(want) {
		t.Fatalf("quotas = %v, want %v", got, want)
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("quota %q = %d vCPUs, want %d", name, got[name], v)
		}
	}
	wantNodeGPUs := []int{8, 20, 12}
	for i, m := range res.Quota.Models {
		if m.NodeGPUs != wantNodeGPUs[i] {
			t.Errorf("%s: node GPUs at cap = %d, want %d", m.Model, m.NodeGPUs, wantNodeGPUs[i])
		}
	}
}
