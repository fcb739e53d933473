package capacity

// Built-in models: the reference workload's three, with their public architectures and
// the checkpoint each describes (the one to upload: docs/deploy-eks.md).
var (
	// Llama8B is Llama 3.1 8B: 32 layers, 8 KV heads of 128, 16-bit.
	Llama8B = Model{Name: "llama-8b", ServedName: "meta-llama/Llama-3.1-8B-Instruct",
		Params: 8.03e9, Layers: 32, KVHeads: 8, HeadDim: 128, WeightBytes: 2, KVBytes: 2,
		Weights: "meta-llama/Llama-3.1-8B-Instruct", Quantization: "bf16"}
	// Qwen32B is Qwen2.5 32B: 64 layers, 8 KV heads of 128, 16-bit.
	Qwen32B = Model{Name: "qwen-32b", ServedName: "Qwen/Qwen2.5-32B-Instruct",
		Params: 32.8e9, Layers: 64, KVHeads: 8, HeadDim: 128, WeightBytes: 2, KVBytes: 2,
		Weights: "Qwen/Qwen2.5-32B-Instruct", Quantization: "bf16"}
	// Llama70BFP8 is Llama 3.1 70B with FP8 weights and a 16-bit KV cache:
	// Red Hat AI's (formerly Neural Magic's) FP8 checkpoint, not Meta's
	// BF16 one, which takes twice the memory.
	Llama70BFP8 = Model{Name: "llama-70b", ServedName: "meta-llama/Llama-3.1-70B-Instruct-FP8",
		Params: 70.6e9, Layers: 80, KVHeads: 8, HeadDim: 128, WeightBytes: 1, KVBytes: 2,
		Weights: "RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8", Quantization: "fp8"}
)

// Built-in GPUs.
var (
	// L40S (g6e family): 48 GB, which docs/requirements.md takes as about 44 GiB usable;
	// 864 GB/s; 362 TFLOPS dense FP16; 2.5 USD per GPU-hour (the reference workload's price).
	L40S = GPU{Name: "L40S", MemoryBytes: 44 * GiB, BandwidthBytesPerSec: 864 * GB,
		FLOPS: 362e12, PricePerHour: 2.5}
)

// ReferenceDeployments are the reference workload's three replicas on L40S: 8B on one GPU, 32B
// at TP 2, 70B FP8 at TP 4.
func ReferenceDeployments() []Deployment {
	return []Deployment{
		Deployment{Model: Llama8B, GPU: L40S, TP: 1}.WithDefaults(),
		Deployment{Model: Qwen32B, GPU: L40S, TP: 2}.WithDefaults(),
		Deployment{Model: Llama70BFP8, GPU: L40S, TP: 4}.WithDefaults(),
	}
}
