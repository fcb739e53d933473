package capacity

import (
	"errors"
	"fmt"
	"slices"
)

// Instance is an EC2 instance type a GPU replica can run on: its GPUs,
// vCPUs and memory, and the vCPU quota it counts against.
type Instance struct {
	Type   string `json:"type"`
	Family string `json:"family"`
	// GPU is the planner's GPU profile the instance carries.
	GPU       string `json:"gpu"`
	GPUs      int    `json:"gpus"`
	VCPUs     int    `json:"vcpus"`
	MemoryGiB int    `json:"memory_gib"`
	// QuotaClass is the EC2 service quota family its vCPUs count against:
	// "G and VT" or "P".
	QuotaClass string `json:"quota_class"`
}

// EC2 quota classes: the on-demand quota is "Running On-Demand <class>
// instances", the spot one "All <class> Spot Instance Requests"; both
// count vCPUs.
const (
	QuotaClassG = "G and VT"
	QuotaClassP = "P"
)

// OnDemandQuotaName is the name of the EC2 service quota that bounds the
// vCPUs of running on-demand instances of the class.
func OnDemandQuotaName(class string) string { return "Running On-Demand " + class + " instances" }

// SpotQuotaName is the name of the EC2 service quota that bounds the vCPUs
// of spot requests of the class.
func SpotQuotaName(class string) string { return "All " + class + " Spot Instance Requests" }

// shape is a row of the instance table, in AWS's order.
func shape(typ, family, gpu string, gpus, vcpus, memGiB int, class string) Instance {
	return Instance{Type: typ, Family: family, GPU: gpu, GPUs: gpus, VCPUs: vcpus, MemoryGiB: memGiB, QuotaClass: class}
}

// Instances is the EC2 GPU instance types the planner's GPUs come in, with
// AWS's published GPUs, vCPUs and memory: the "Amazon EC2 G6e instances"
// product page (g6e, NVIDIA L40S), "Amazon EC2 G5 instances" (g5, A10G)
// and "Amazon EC2 P5 instances" (p5.48xlarge, H100 SXM; p5en.48xlarge,
// H200). The GPU counts
// decide which sizes can hold a replica at all: no g6e has 2 GPUs, so a
// replica at TP 2 needs a 4-GPU g6e.12xlarge (48 vCPUs), as one at TP 4.
func Instances() []Instance {
	g, p := QuotaClassG, QuotaClassP
	return []Instance{
		shape("g6e.xlarge", "g6e", L40S.Name, 1, 4, 32, g),
		shape("g6e.2xlarge", "g6e", L40S.Name, 1, 8, 64, g),
		shape("g6e.4xlarge", "g6e", L40S.Name, 1, 16, 128, g),
		shape("g6e.8xlarge", "g6e", L40S.Name, 1, 32, 256, g),
		shape("g6e.16xlarge", "g6e", L40S.Name, 1, 64, 512, g),
		shape("g6e.12xlarge", "g6e", L40S.Name, 4, 48, 384, g),
		shape("g6e.24xlarge", "g6e", L40S.Name, 4, 96, 768, g),
		shape("g6e.48xlarge", "g6e", L40S.Name, 8, 192, 1536, g),
		shape("g5.xlarge", "g5", A10G.Name, 1, 4, 16, g),
		shape("g5.2xlarge", "g5", A10G.Name, 1, 8, 32, g),
		shape("g5.4xlarge", "g5", A10G.Name, 1, 16, 64, g),
		shape("g5.8xlarge", "g5", A10G.Name, 1, 32, 128, g),
		shape("g5.16xlarge", "g5", A10G.Name, 1, 64, 256, g),
		shape("g5.12xlarge", "g5", A10G.Name, 4, 48, 192, g),
		shape("g5.24xlarge", "g5", A10G.Name, 4, 96, 384, g),
		shape("g5.48xlarge", "g5", A10G.Name, 8, 192, 768, g),
		shape("p5.48xlarge", "p5", H100SXM.Name, 8, 192, 2048, p),
		shape("p5en.48xlarge", "p5en", H200.Name, 8, 192, 2048, p),
	}
}

// ErrNoInstance is returned when no known instance type holds a replica.
var ErrNoInstance = errors.New("no EC2 instance type holds the replica")

// SmallestInstance is the instance type of the GPU's family with the
// fewest vCPUs (then the least memory) that holds tp GPUs: the node
// Karpenter buys for one replica on its own. The reference workload's 8B (TP 1) gets a
// g6e.xlarge; its 32B (TP 2) and 70B (TP 4) both a g6e.12xlarge.
func SmallestInstance(gpu string, tp int) (Instance, error) {
	var fit []Instance
	for _, in := range Instances() {
		if in.GPU == gpu && in.GPUs >= tp {
			fit = append(fit, in)
		}
	}
	if len(fit) == 0 {
		return Instance{}, fmt.Errorf("%w: %d × %s", ErrNoInstance, tp, gpu)
	}
	return slices.MinFunc(fit, func(a, b Instance) int {
		if a.VCPUs != b.VCPUs {
			return a.VCPUs - b.VCPUs
		}
		return a.MemoryGiB - b.MemoryGiB
	}), nil
}

// FamilyOf is the instance family that carries the GPU ("g6e" for the
// L40S), or "" when the table has none.
func FamilyOf(gpu string) string {
	for _, in := range Instances() {
		if in.GPU == gpu {
			return in.Family
		}
	}
	return ""
}
