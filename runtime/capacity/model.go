package capacity

import (
	"errors"
	"fmt"
)

// Model is the architecture of a transformer as far as serving cost goes.
type Model struct {
	// Name is the platform's short name ("llama-8b"); ServedName is what the
	// engine reports as model_name.
	Name       string `json:"name" yaml:"name"`
	ServedName string `json:"served_name" yaml:"served_name"`
	// Params is the number of parameters.
	Params float64 `json:"params" yaml:"params"`
	Layers int     `json:"layers" yaml:"layers"`
	// KVHeads is the number of key-value heads (grouped-query attention).
	KVHeads int `json:"kv_heads" yaml:"kv_heads"`
	HeadDim int `json:"head_dim" yaml:"head_dim"`
	// WeightBytes is bytes per parameter: 2 for FP16/BF16, 1 for FP8.
	WeightBytes float64 `json:"weight_bytes" yaml:"weight_bytes"`
	// KVBytes is bytes per cached key or value element: 2 for FP16.
	KVBytes float64 `json:"kv_bytes" yaml:"kv_bytes"`
	// Weights is the checkpoint the profile describes (a Hugging Face
	// repository): what is uploaded under the model's revision and what
	// the engine loads. Quantization is its weight format, which must agree
	// with WeightBytes: the planner sizes the KV cache from it.
	Weights      string `json:"weights" yaml:"weights"`
	Quantization string `json:"quantization" yaml:"quantization"`
}

// bytesPerWeight is the bytes per parameter of each weight format.
var bytesPerWeight = map[string]float64{"bf16": 2, "fp16": 2, "fp8": 1}

// ErrQuantizationMismatch is returned when a profile's weight format and
// its bytes per parameter disagree: the planner would size the KV cache
// for weights the engine does not load.
var ErrQuantizationMismatch = errors.New("quantization does not match weight bytes")

// Validate reports the first missing or impossible field.
func (m Model) Validate() error {
	switch {
	case m.Name == "":
		return errors.New("model: name is required")
	case m.Params <= 0:
		return fmt.Errorf("model %s: params must be positive", m.Name)
	case m.Layers <= 0 || m.KVHeads <= 0 || m.HeadDim <= 0:
		return fmt.Errorf("model %s: layers, kv_heads and head_dim must be positive", m.Name)
	case m.WeightBytes <= 0 || m.KVBytes <= 0:
		return fmt.Errorf("model %s: weight_bytes and kv_bytes must be positive", m.Name)
	}
	if m.Quantization == "" {
		return nil
	}
	b, ok := bytesPerWeight[m.Quantization]
	switch {
	case !ok:
		return fmt.Errorf("model %s: quantization %q: want bf16, fp16 or fp8", m.Name, m.Quantization)
	case b != m.WeightBytes:
		return fmt.Errorf("model %s: %w: %s is %g bytes per parameter, the profile says %g",
			m.Name, ErrQuantizationMismatch, m.Quantization, b, m.WeightBytes)
	}
	return nil
}

// KVBytesPerToken is the KV cache one token occupies across all ranks:
// 2 (key and value) × layers × KV heads × head size × bytes per element.
// The reference workload's 8B model: 2 × 32 × 8 × 128 × 2 = 131,072 bytes.
func (m Model) KVBytesPerToken() float64 {
	return 2 * float64(m.Layers) * float64(m.KVHeads) * float64(m.HeadDim) * m.KVBytes
}

// WeightBytesTotal is the memory the weights take: parameters × bytes each.
func (m Model) WeightBytesTotal() float64 { return m.Params * m.WeightBytes }

// GPU is an accelerator as far as serving cost goes.
type GPU struct {
	Name string `json:"name" yaml:"name"`
	// MemoryBytes is the memory the driver reports as usable (docs/requirements.md takes
	// 44 GiB for a 48 GB L40S).
	MemoryBytes float64 `json:"memory_bytes" yaml:"memory_bytes"`
	// BandwidthBytesPerSec is peak memory bandwidth.
	BandwidthBytesPerSec float64 `json:"bandwidth_bytes_per_sec" yaml:"bandwidth_bytes_per_sec"`
	// FLOPS is dense 16-bit tensor throughput.
	FLOPS float64 `json:"flops" yaml:"flops"`
	// PricePerHour is what one GPU-hour costs in USD.
	PricePerHour float64 `json:"price_per_hour" yaml:"price_per_hour"`
}

// Validate reports the first missing or impossible field.
func (g GPU) Validate() error {
	switch {
	case g.Name == "":
		return errors.New("gpu: name is required")
	case g.MemoryBytes <= 0 || g.BandwidthBytesPerSec <= 0 || g.FLOPS <= 0:
		return fmt.Errorf("gpu %s: memory, bandwidth and flops must be positive", g.Name)
	case g.PricePerHour < 0:
		return fmt.Errorf("gpu %s: price_per_hour must not be negative", g.Name)
	}
	return nil
}
