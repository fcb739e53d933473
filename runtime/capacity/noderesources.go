package capacity

import "math"

// What a GPU node keeps for itself before its GPUs share the rest: the
// figures Karpenter uses to decide whether a pod fits an instance type it
// has not launched yet, so a replica's requests computed from them fit the
// node Karpenter buys for it.
const (
	// VMMemoryOverhead is Karpenter's default vmMemoryOverheadPercent
	// (7.5 %): the share of an instance's memory it assumes the hypervisor
	// and kernel keep before the node reports its real capacity.
	VMMemoryOverhead = 0.075
	// KubeReservedMemoryBaseMiB and KubeReservedMemoryPerPodMiB are the EKS
	// AMI's and Karpenter's kube-reserved memory: 255 MiB + 11 MiB per pod
	// the node may run.
	KubeReservedMemoryBaseMiB   = 255
	KubeReservedMemoryPerPodMiB = 11
	// ReservedForPods is the pod count the kube-reserved memory is sized
	// for: 737, the ENI-limited pod count of the large instance types (15
	// interfaces × 49 addresses + 2). Karpenter reserves for the instance's
	// own ENI-limited count, which on the small shapes is far lower (a
	// g6e.xlarge keeps several GiB to spare); that no shape here exceeds
	// 737 is an assumption, which pinning the EC2NodeClass's kubelet
	// maxPods would make exact.
	ReservedForPods = 737
	// EvictionMemoryMiB is Karpenter's default evictionHard
	// memory.available: kubelet evicts pods below it.
	EvictionMemoryMiB = 100
	// DaemonSetCPUMillis and DaemonSetMemoryMiB are the budget of the
	// DaemonSets on every GPU node (the VPC CNI, kube-proxy, the Pod
	// Identity agent, NVIDIA's device plugin, the DCGM exporter and the
	// node exporter): their requests together must stay within it.
	DaemonSetCPUMillis = 750
	DaemonSetMemoryMiB = 1536
)

// Resources is CPU and memory as a pod requests them.
type Resources struct {
	CPUMillis int64 `json:"cpu_millis"`
	MemoryMiB int64 `json:"memory_mib"`
}

// KubeReservedCPUMillis is the EKS AMI's (and Karpenter's) kube-reserved
// CPU for a node of vcpus cores: 6 % of the first core, 1 % of the second,
// 0.5 % of the third and fourth, 0.25 % of every further one.
func KubeReservedCPUMillis(vcpus int) float64 {
	steps := []struct {
		cores  int
		millis float64
	}{{1, 60}, {1, 10}, {2, 5}}
	var r float64
	left := vcpus
	for _, s := range steps {
		n := min(left, s.cores)
		r += float64(n) * s.millis
		left -= n
	}
	return r + float64(left)*2.5
}

// Allocatable is what the instance's pods may request by Karpenter's
// reckoning, less the DaemonSets' budget: what the model replicas share.
func (in Instance) Allocatable() Resources {
	memMiB := math.Floor(float64(in.MemoryGiB) * 1024 * (1 - VMMemoryOverhead))
	memMiB -= KubeReservedMemoryBaseMiB + KubeReservedMemoryPerPodMiB*ReservedForPods + EvictionMemoryMiB + DaemonSetMemoryMiB
	cpu := float64(in.VCPUs)*1000 - KubeReservedCPUMillis(in.VCPUs) - DaemonSetCPUMillis
	return Resources{CPUMillis: int64(cpu), MemoryMiB: int64(memMiB)}
}

// ReplicaResources is the CPU and memory a replica of tp GPUs requests:
// the share of tp GPUs of its smallest instance's Allocatable, CPU rounded
// down to 100 millicores and memory to whole GiB. A node of that shape
// then holds as many replicas as it has GPUs, and every larger shape of
// the family, whose GPUs each bring more CPU and memory, holds them too.
// The reference workload's 8B gets 3.1 CPUs and 19 GiB (g6e.xlarge), its 32B 23.5 CPUs
// and 172 GiB, its 70B 47 CPUs and 345 GiB (g6e.12xlarge).
func ReplicaResources(gpu string, tp int) (Resources, error) {
	in, err := SmallestInstance(gpu, tp)
	if err != nil {
		return Resources{}, err
	}
	a := in.Allocatable()
	share := float64(tp) / float64(in.GPUs)
	cpu := math.Floor(float64(a.CPUMillis)*share/100) * 100
	mem := math.Floor(float64(a.MemoryMiB)*share/1024) * 1024
	return Resources{CPUMillis: int64(cpu), MemoryMiB: int64(mem)}, nil
}
