package twin

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// TestInstanceTypesMatchThePlanner: the kwok provider's instance types
// carry the table's GPUs, allocatable CPU and memory as the planner
// reckons them (before the DaemonSets' budget), on-demand and spot with
// spot cheaper, the AWS family label; and the cheapest type that fits a
// replica's requests, which Karpenter launches, is the shape the planner
// buys for it.
func TestInstanceTypesMatchThePlanner(t *testing.T) {
	raw, err := InstanceTypes(capacity.Instances())
	if err != nil {
		t.Fatal(err)
	}
	var types []kwokInstanceType
	if err := json.Unmarshal(raw, &types); err != nil {
		t.Fatal(err)
	}
	allocatable := func(it kwokInstanceType, name corev1.ResourceName, overhead resource.Quantity) resource.Quantity {
		q := it.Resources[name]
		q.Sub(overhead)
		return q
	}
	onDemand := map[string]float64{}
	for i, in := range capacity.Instances() {
		it := types[i]
		t.Run(in.Type, func(t *testing.T) {
			if it.Name != in.Type {
				t.Fatalf("type %d is %s, want %s", i, it.Name, in.Type)
			}
			if gpus := it.Resources[GPUResource]; gpus.Value() != int64(in.GPUs) {
				t.Errorf("%s: %s, want %d", GPUResource, gpus.String(), in.GPUs)
			}
			a := in.Allocatable()
			cpu, mem := allocatable(it, corev1.ResourceCPU, kwokOverheadCPU), allocatable(it, corev1.ResourceMemory, kwokOverheadMemory)
			if got, want := cpu.MilliValue(), a.CPUMillis+capacity.DaemonSetCPUMillis; got != want {
				t.Errorf("allocatable CPU %dm, want %dm", got, want)
			}
			if got, want := mem.Value()>>20, a.MemoryMiB+capacity.DaemonSetMemoryMiB; got != want {
				t.Errorf("allocatable memory %d MiB, want %d MiB", got, want)
			}
			prices := map[string][]float64{}
			for _, o := range it.Offerings {
				var ct, family string
				for _, r := range o.Requirements {
					switch r.Key {
					case "karpenter.sh/capacity-type":
						ct = r.Values[0]
					case awsFamilyLabel:
						family = r.Values[0]
					}
				}
				if family != in.Family {
					t.Errorf("offering of family %q, want %q", family, in.Family)
				}
				prices[ct] = append(prices[ct], o.Price)
			}
			if len(prices["on-demand"]) != len(twinZones) || len(prices["spot"]) != len(twinZones) {
				t.Fatalf("offerings %v, want on-demand and spot in %d zones", prices, len(twinZones))
			}
			if slices.Max(prices["spot"]) >= slices.Min(prices["on-demand"]) {
				t.Errorf("spot %v not cheaper than on-demand %v", prices["spot"], prices["on-demand"])
			}
			onDemand[in.Type] = prices["on-demand"][0]
		})
	}
	for _, tp := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("L40S TP %d", tp), func(t *testing.T) {
			want, err := capacity.SmallestInstance(capacity.L40S.Name, tp)
			if err != nil {
				t.Fatal(err)
			}
			req, err := capacity.ReplicaResources(capacity.L40S.Name, tp)
			if err != nil {
				t.Fatal(err)
			}
			var got, tie string
			for i, in := range capacity.Instances() {
				it := types[i]
				cpu, mem := allocatable(it, corev1.ResourceCPU, kwokOverheadCPU), allocatable(it, corev1.ResourceMemory, kwokOverheadMemory)
				fits := in.GPU == capacity.L40S.Name && in.GPUs >= tp && cpu.MilliValue() >= req.CPUMillis && mem.Value()>>20 >= req.MemoryMiB
				switch {
				case !fits:
				case got == "" || onDemand[in.Type] < onDemand[got]:
					got, tie = in.Type, ""
				case onDemand[in.Type] == onDemand[got]:
					tie = in.Type // Karpenter would pick either
				}
			}
			if tie != "" {
				t.Errorf("%s and %s fit at the same price: Karpenter's choice between them is a coin toss", got, tie)
			}
			if got != want.Type {
				t.Errorf("the cheapest type that fits %d GPUs, %dm, %d MiB is %s, the planner buys %s", tp, req.CPUMillis, req.MemoryMiB, got, want.Type)
			}
		})
	}
}
