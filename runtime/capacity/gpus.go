package capacity

// More built-in GPUs beside the reference workload's L40S. MemoryBytes
// follows the rule docs/requirements.md applies to the L40S: the total the driver reports (nvidia-smi's
// memory.total), rounded down to whole GiB — the L40S reports 46,068 MiB,
// which is the reference workload's "about 44 GiB". FLOPS is dense (not sparse) BF16/FP16
// tensor throughput. PricePerHour is an indicative on-demand cloud rate per
// GPU-hour, rounded; prices move, so plans that depend on them should set
// the contract's price in a config file.
var (
	// H100SXM is the NVIDIA H100 SXM5 80 GB (NVIDIA H100 Tensor Core GPU
	// datasheet): 80 GB HBM3 (the driver reports 81,559 MiB, 79.6 GiB),
	// 3.35 TB/s, 1,979 TFLOPS BF16 with sparsity, so 989 dense.
	H100SXM = GPU{Name: "H100-SXM", MemoryBytes: 79 * GiB, BandwidthBytesPerSec: 3350 * GB,
		FLOPS: 989e12, PricePerHour: 6.9}
	// H200 is the NVIDIA H200 SXM 141 GB (NVIDIA H200 Tensor Core GPU
	// datasheet): 141 GB HBM3e (the driver reports 143,771 MiB, 140.4 GiB),
	// 4.8 TB/s, the H100's 989 TFLOPS dense BF16.
	H200 = GPU{Name: "H200", MemoryBytes: 140 * GiB, BandwidthBytesPerSec: 4800 * GB,
		FLOPS: 989e12, PricePerHour: 7.9}
	// A10G is AWS's variant of the NVIDIA A10 in the g5 family. NVIDIA
	// publishes no A10G datasheet: memory and bandwidth are the NVIDIA A10
	// Tensor Core GPU datasheet's, which the A10G shares (24 GB GDDR6, the
	// driver reports 23,028 MiB, 22.5 GiB; 600 GB/s); its 70 TFLOPS dense
	// BF16 is from AWS's Amazon EC2 G5 instance specifications (the A10's is
	// 125).
	A10G = GPU{Name: "A10G", MemoryBytes: 22 * GiB, BandwidthBytesPerSec: 600 * GB,
		FLOPS: 70e12, PricePerHour: 1.0}
)

// BuiltinModels returns the built-in model profiles, the reference workload's three.
func BuiltinModels() []Model {
	return []Model{Llama8B, Qwen32B, Llama70BFP8}
}

// BuiltinGPUs returns the built-in GPU profiles: the reference workload's L40S first.
func BuiltinGPUs() []GPU {
	return []GPU{L40S, H100SXM, H200, A10G}
}

// LookupModel returns the built-in model of that name.
func LookupModel(name string) (Model, bool) {
	for _, m := range BuiltinModels() {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}

// LookupGPU returns the built-in GPU of that name.
func LookupGPU(name string) (GPU, bool) {
	for _, g := range BuiltinGPUs() {
		if g.Name == name {
			return g, true
		}
	}
	return GPU{}, false
}
