package capacity

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults a Deployment takes for fields left zero, each with its reason.
const (
	// DefaultGPUMemoryUtilization is vLLM's own default and the reference workload's 90 %.
	DefaultGPUMemoryUtilization = 0.9
	// DefaultActivationBytes is the reference workload's "activations about 2 GiB" per GPU.
	DefaultActivationBytes = 2 * GiB
	// DefaultBlockSize is vLLM's KV block size in tokens.
	DefaultBlockSize = 16
	// DefaultBandwidthEfficiency is the share of peak memory bandwidth a
	// decoding step achieves; with it the reference workload's 8B replica makes about
	// 47 tokens/s per stream at 32 streams.
	DefaultBandwidthEfficiency = 0.95
	// DefaultFLOPSEfficiency is the share of peak tensor throughput a
	// prefill achieves (model FLOPs utilisation).
	DefaultFLOPSEfficiency = 0.5
	// DefaultStepOverhead is the fixed cost of one engine step: scheduling,
	// sampling and kernel launches.
	DefaultStepOverhead = 500 * time.Microsecond
	// DefaultTPOverheadPerLayer is the all-reduce cost per layer and step
	// when a model is split across GPUs (tensor parallelism).
	DefaultTPOverheadPerLayer = 30 * time.Microsecond
)

// Deployment is one replica of a model on TP GPUs of one kind, with the
// engine settings that decide its capacity and speed.
type Deployment struct {
	Model Model `json:"model" yaml:"model"`
	GPU   GPU   `json:"gpu" yaml:"gpu"`
	// TP is the tensor-parallel size: GPUs per replica.
	TP                   int     `json:"tensor_parallel_size" yaml:"tensor_parallel_size"`
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization" yaml:"gpu_memory_utilization"`
	// ActivationBytes is the peak activation memory reserved per GPU.
	ActivationBytes     float64       `json:"activation_bytes" yaml:"activation_bytes"`
	BlockSize           int           `json:"block_size" yaml:"block_size"`
	BandwidthEfficiency float64       `json:"bandwidth_efficiency" yaml:"bandwidth_efficiency"`
	FLOPSEfficiency     float64       `json:"flops_efficiency" yaml:"flops_efficiency"`
	StepOverhead        time.Duration `json:"step_overhead" yaml:"step_overhead"`
	TPOverheadPerLayer  time.Duration `json:"tp_overhead_per_layer" yaml:"tp_overhead_per_layer"`
}

// WithDefaults returns d with every zero field set to its default.
func (d Deployment) WithDefaults() Deployment {
	if d.TP == 0 {
		d.TP = 1
	}
	if d.GPUMemoryUtilization == 0 {
		d.GPUMemoryUtilization = DefaultGPUMemoryUtilization
	}
	if d.ActivationBytes == 0 {
		d.ActivationBytes = DefaultActivationBytes
	}
	if d.BlockSize == 0 {
		d.BlockSize = DefaultBlockSize
	}
	if d.BandwidthEfficiency == 0 {
		d.BandwidthEfficiency = DefaultBandwidthEfficiency
	}
	if d.FLOPSEfficiency == 0 {
		d.FLOPSEfficiency = DefaultFLOPSEfficiency
	}
	if d.StepOverhead == 0 {
		d.StepOverhead = DefaultStepOverhead
	}
	if d.TPOverheadPerLayer == 0 {
		d.TPOverheadPerLayer = DefaultTPOverheadPerLayer
	}
	return d
}

// ErrDoesNotFit is returned when the weights leave no memory for KV cache.
var ErrDoesNotFit = errors.New("model does not fit")

// Validate checks the deployment, including that the model fits.
func (d Deployment) Validate() error {
	if err := d.Model.Validate(); err != nil {
		return err
	}
	if err := d.GPU.Validate(); err != nil {
		return err
	}
	switch {
	case d.TP < 1:
		return fmt.Errorf("tensor_parallel_size must be at least 1, got %d", d.TP)
	case d.GPUMemoryUtilization <= 0 || d.GPUMemoryUtilization > 1:
		return fmt.Errorf("gpu_memory_utilization must be in (0, 1], got %g", d.GPUMemoryUtilization)
	case d.BlockSize < 1:
		return fmt.Errorf("block_size must be at least 1, got %d", d.BlockSize)
	case d.BandwidthEfficiency <= 0 || d.BandwidthEfficiency > 1 || d.FLOPSEfficiency <= 0 || d.FLOPSEfficiency > 1:
		return errors.New("bandwidth_efficiency and flops_efficiency must be in (0, 1]")
	}
	if d.KVCacheBytes() <= 0 {
		return fmt.Errorf("%s on %d × %s: %w: weights %.1f GiB, usable %.1f GiB",
			d.Model.Name, d.TP, d.GPU.Name, ErrDoesNotFit, d.Model.WeightBytesTotal()/GiB, d.UsableBytes()/GiB)
	}
	return nil
}

// UsableBytes is the memory the engine may take on all GPUs of the replica:
// GPU memory × gpu-memory-utilization × TP. The reference workload's L40S: 39.6 GiB.
func (d Deployment) UsableBytes() float64 {
	return d.GPU.MemoryBytes * d.GPUMemoryUtilization * float64(d.TP)
}

// KVCacheBytes is what is left for KV cache once weights and activations
// are placed: usable − weights − activations × TP. The reference workload's 8B on an
// L40S: 39.6 − 15 − 2 = 22.6 GiB.
func (d Deployment) KVCacheBytes() float64 {
	return d.UsableBytes() - d.Model.WeightBytesTotal() - d.ActivationBytes*float64(d.TP)
}

// KVCapacityTokens is how many tokens the KV cache holds, rounded down to
// whole blocks as vLLM allocates them.
func (d Deployment) KVCapacityTokens() int64 {
	return d.KVCapacityBlocks() * int64(d.BlockSize)
}

// KVCapacityBlocks is the number of KV blocks (vLLM's num_gpu_blocks).
func (d Deployment) KVCapacityBlocks() int64 {
	kv := d.KVCacheBytes()
	if kv <= 0 {
		return 0
	}
	return int64(math.Floor(kv / (d.Model.KVBytesPerToken() * float64(d.BlockSize))))
}

// StreamsAt is how many sequences of contextTokens each fit in the KV cache
// at once (fractional; the reference workload's 8B: about 90 at 2,048, 22 at 8,192).
func (d Deployment) StreamsAt(contextTokens int64) float64 {
	if contextTokens <= 0 {
		return 0
	}
	return float64(d.KVCapacityTokens()) / float64(contextTokens)
}

// DecodeStep is the time of one decoding step that emits one token for each
// running sequence: every GPU reads its share of the weights and of the KV
// cache of all running tokens once, at the achieved bandwidth, plus a fixed
// step overhead and, under tensor parallelism, an all-reduce per layer.
func (d Deployment) DecodeStep(kvTokens int64) time.Duration {
	bytesPerGPU := (d.Model.WeightBytesTotal() + float64(kvTokens)*d.Model.KVBytesPerToken()) / float64(d.TP)
	secs := bytesPerGPU / (d.GPU.BandwidthBytesPerSec * d.BandwidthEfficiency)
	step := time.Duration(secs*float64(time.Second)) + d.StepOverhead
	if d.TP > 1 {
		step += time.Duration(d.Model.Layers) * d.TPOverheadPerLayer
	}
	return step
}

// Prefill is the compute time to process promptTokens: 2 × parameters ×
// tokens floating-point operations across TP GPUs at the achieved rate.
func (d Deployment) Prefill(promptTokens int64) time.Duration {
	flops := 2 * d.Model.Params * float64(promptTokens)
	secs := flops / (d.GPU.FLOPS * d.FLOPSEfficiency * float64(d.TP))
	return time.Duration(secs * float64(time.Second))
}

// TokensPerSecond is the output rate of one stream when streams sequences of
// contextTokens each decode together.
func (d Deployment) TokensPerSecond(streams, contextTokens int64) float64 {
	step := d.DecodeStep(streams * contextTokens)
	return 1 / step.Seconds()
}
