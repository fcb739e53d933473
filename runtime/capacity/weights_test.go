package capacity_test

import (
	"errors"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// TestWeightsAgreeWithThePlan checks that a profile cannot declare one
// weight format and be sized for another: the 70B FP8 profile planned with
// BF16 weights (or called BF16 while sized at one byte a parameter) is
// refused, while a consistent BF16 70B is planned for what it is.
func TestWeightsAgreeWithThePlan(t *testing.T) {
	workload := "workloads:\n  - {model: llama-70b, gpu: L40S, tensor_parallel_size: 4, peak_streams: 8, planned_streams_per_replica: 8}\n"
	tests := []struct {
		name    string
		models  string
		wantErr error
	}{
		{"built-in FP8 profile", "", nil},
		{"BF16 bytes under the FP8 profile", "models:\n  - {name: llama-70b, weight_bytes_per_param: 2}\n", capacity.ErrQuantizationMismatch},
		{"BF16 name on FP8 bytes", "models:\n  - {name: llama-70b, quantization: bf16}\n", capacity.ErrQuantizationMismatch},
		{"FP8 name on a new BF16 model", "models:\n  - {name: m, params_billions: 8, layers: 32, kv_heads: 8, head_dim: 128, weight_bytes_per_param: 2, kv_bytes_per_element: 2, quantization: fp8}\n", capacity.ErrQuantizationMismatch},
		{"consistent BF16 70B", "models:\n  - {name: llama-70b, weights: meta-llama/Llama-3.1-70B-Instruct, quantization: bf16, weight_bytes_per_param: 2}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := capacity.ParseConfig([]byte(tt.models + workload))
			if err == nil {
				_, err = capacity.Plan(in)
			}
			if !errors.Is(err, tt.wantErr) && !(tt.wantErr == nil && err == nil) {
				t.Fatalf("plan error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestBuiltinProfilesNameTheirWeights checks that every built-in profile
// says which checkpoint it was sized for, in a format that matches its
// bytes per parameter.
func TestBuiltinProfilesNameTheirWeights(t *testing.T) {
	for _, m := range capacity.BuiltinModels() {
		t.Run(m.Name, func(t *testing.T) {
			if m.Weights == "" || m.Quantization == "" || m.ServedName == "" {
				t.Errorf("%s: weights %q, quantization %q, served name %q: want all three", m.Name, m.Weights, m.Quantization, m.ServedName)
			}
			if err := m.Validate(); err != nil {
				t.Errorf("%s: %v", m.Name, err)
			}
		})
	}
}
