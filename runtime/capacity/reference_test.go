package capacity_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// referencePlan plans the reference workload or stops the test.
func referencePlan(t *testing.T) capacity.Result {
	t.Helper()
	res, err := capacity.Plan(capacity.ReferenceInput())
	if err != nil {
		t.Fatalf("Plan(ReferenceInput()) error: %v", err)
	}
	return res
}

// model returns the plan of one model by name or stops the test.
func model(t *testing.T, res capacity.Result, name string) capacity.ModelPlan {
	t.Helper()
	for _, m := range res.Models {
		if m.Model == name {
			return m
		}
	}
	t.Fatalf("no plan for model %s", name)
	return capacity.ModelPlan{}
}

// sig2 is how docs/requirements.md rounds a ratio: two significant figures.
func sig2(x float64) float64 { return capacity.RoundSig(x, capacity.RatioSignificantDigits) }

// gib1 is how the plan rounds memory: GiB to 0.1.
func gib1(b float64) float64 { return capacity.RoundTo(b/capacity.GiB, 1) }

// TestReferenceWorkedNumbers reproduces every worked number of the reference
// workload in docs/requirements.md (the memory arithmetic, the GPUs for 200
// streams, cost, cost per million tokens and queueing); each subtest is
// named by the statement it checks and compares the planner's number,
// rounded as docs/requirements.md rounds it, with the stated one.
func TestReferenceWorkedNumbers(t *testing.T) {
	res := referencePlan(t)
	m8, m32, m70 := model(t, res, "llama-8b"), model(t, res, "qwen-32b"), model(t, res, "llama-70b")
	tests := []struct {
		name      string
		got, want float64
	}{
		// KV-cache memory.
		{"the KV cache per token is 2 x 32 x 8 x 128 x 2 bytes = 131,072 bytes", m8.Memory.KVBytesPerToken, 131072},
		{"131,072 bytes, 128 KiB", m8.Memory.KVBytesPerToken / capacity.KiB, 128},
		{"A 2,048-token context (prompt plus answer) needs 256 MiB", m8.Memory.KVBytesAtContext / capacity.MiB, 256},
		{"an 8,192-token context needs 1 GiB", m8.Memory.KVBytesAtMaxModelLen / capacity.GiB, 1},
		{"An L40S GPU (g6e family) has 48 GB, about 44 GiB", m8.Memory.GPUMemoryBytes / capacity.GiB, math.Floor(48 * capacity.GB / capacity.GiB)},
		{"vLLM takes 90 percent, 39.6 GiB", gib1(m8.Memory.UsableBytesPerReplica), 39.6},
		{"Weights in 16-bit take 15 GiB", gib1(m8.Memory.WeightBytes), 15},
		{"activations about 2 GiB", m8.Memory.ActivationBytesPerGPU / capacity.GiB, 2},
		{"leaving 22.6 GiB for KV cache", gib1(m8.Memory.KVCacheBytesPerReplica), 22.6},
		{"about 90 streams at 2k context", float64(m8.Memory.StreamsAtContext), 90},
		{"only 22 at 8k", float64(m8.Memory.StreamsAtMaxModelLen), 22},
		// GPUs for 200 streams.
		{"the split is 140 streams on 8B, 50 on 32B, 10 on 70B", float64(m8.Replicas.PeakStreams + m32.Replicas.PeakStreams + m70.Replicas.PeakStreams), 200},
		{"Plan 32 streams per 8B replica for latency headroom: 140 / 32 = 4.4", sig2(m8.Replicas.ReplicasForLoad), 4.4},
		{"so 6 replicas", float64(m8.Replicas.Replicas), 6},
		{"on 1 GPU each", float64(m8.Replicas.GPUsPerReplica), 1},
		{"The 32B model needs 2 GPUs per replica", float64(m32.Memory.MinTensorParallelSize), 2},
		{"at 16 streams: 50 / 16 = 3.1", sig2(m32.Replicas.ReplicasForLoad), 3.1},
		{"so 4 replicas", float64(m32.Replicas.Replicas), 4},
		{"8 GPUs (32B)", float64(m32.Replicas.GPUs), 8},
		{"The 70B model in FP8 needs 4 GPUs per replica", float64(m70.Replicas.GPUsPerReplica), 4},
		{"at 8 streams: 2 replicas", float64(m70.Replicas.Replicas), 2},
		{"8 GPUs (70B)", float64(m70.Replicas.GPUs), 8},
		{"Peak total 22 GPUs", float64(res.Fleet.GPUsAtPeak), 22},
		{"8 of them are the on-premises nodes", float64(res.Fleet.OnPremGPUs), 8},
		// Cost.
		{"Assume 2.5 USD per GPU-hour for a cloud L40S", res.Cost.PricePerGPUHourUSD, 2.5},
		{"Peak is 14 cloud GPUs", float64(res.Fleet.CloudGPUs), 14},
		{"14 cloud GPUs x 2.5 = 35 USD per hour", res.Cost.CostPerHourPeakUSD, 35},
		{"at an average of 8 cloud GPUs, 8 x 2.5 x 730 = 14,600 USD per month", res.Cost.CostPerMonthUSD, 14600},
		// Cost per million tokens.
		{"an 8B replica produces 1,500 output tokens per second across its batch", m8.Throughput.ReplicaTokensPerSecond, 1500},
		{"5.4 million tokens per hour", m8.Throughput.ReplicaMillionTokensPerHour, 5.4},
		{"2.5 / 5.4 = 0.46 USD per million tokens at full load", sig2(m8.Throughput.CostPerMillionFullLoadUSD), 0.46},
		{"about 0.93 USD at 50 percent utilisation", sig2(m8.Throughput.CostPerMillionAtUtilisationUSD), 0.93},
		{"The 70B replica at 300 tokens per second on 4 GPUs costs 10", m70.Throughput.ReplicaCostPerHourUSD, 10},
		{"/ 1.08", capacity.RoundTo(m70.Throughput.ReplicaMillionTokensPerHour, 2), 1.08},
		{"= 9.3 USD per million", sig2(m70.Throughput.CostPerMillionFullLoadUSD), 9.3},
		// Queue budget.
		{"a 400-token answer at 47 tokens per second per stream", sig2(m8.Throughput.StreamTokensPerSecond), 47},
		{"takes about 8.5 seconds", sig2(m8.Queue.SecondsPerAnswer), 8.5},
		{"a 32-stream replica finishes about 3.8 requests per second", sig2(m8.Queue.RequestsPerSecondPerReplica), 3.8},
		{"a 30-second queue limit holds a burst of about 110 requests per replica", sig2(float64(m8.Queue.BurstRequestsPerReplica)), 110},
		// 30 s × 1,500 tokens/s ÷ 400 tokens = 112.5 requests: 112 whole ones start in time.
		{"the 110 is 112 whole requests before rounding", float64(m8.Queue.BurstRequestsPerReplica), math.Floor(30 * 1500.0 / 400)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

// TestReferenceWorkedFacts checks the reference workload's worked statements that are not
// numbers.
func TestReferenceWorkedFacts(t *testing.T) {
	res := referencePlan(t)
	t.Run("vllm-8b args --max-model-len 8192 --max-num-seqs 64", func(t *testing.T) {
		got := strings.Join(model(t, res, "llama-8b").Flags.Args(), " ")
		for _, want := range []string{"--max-model-len 8192", "--max-num-seqs 64", "--tensor-parallel-size 1"} {
			if !strings.Contains(got, want) {
				t.Errorf("got %q, want it to contain %q", got, want)
			}
		}
	})
	t.Run("vllm-32b --tensor-parallel-size 2 and vllm-70b --tensor-parallel-size 4", func(t *testing.T) {
		got := []int{model(t, res, "qwen-32b").Flags.TensorParallelSize, model(t, res, "llama-70b").Flags.TensorParallelSize}
		if want := []int{2, 4}; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("The 32B model needs 2 GPUs per replica (64 GB of 16-bit weights)", func(t *testing.T) {
		// The profile's 32.8 B parameters make 65.6 GB; the reference workload's 64 GB is
		// the nominal 32 B × 2 bytes. Either is more than one L40S holds.
		one := capacity.Deployment{Model: capacity.Qwen32B, GPU: capacity.L40S, TP: 1}.WithDefaults()
		if got := one.Validate(); !errors.Is(got, capacity.ErrDoesNotFit) {
			t.Errorf("got %v on one L40S, want %v", got, capacity.ErrDoesNotFit)
		}
	})
	t.Run("14,600 USD per month, under the 20,000 USD target", func(t *testing.T) {
		if got := res.Cost.WithinBudget; !got {
			t.Errorf("got within budget %v, want true (%.0f of %.0f)", got, res.Cost.CostPerMonthUSD, res.Cost.MonthlyBudgetUSD)
		}
	})
	t.Run("Memory sets the batch size: the 8B holds more streams at 2k than it plans", func(t *testing.T) {
		m := model(t, res, "llama-8b")
		if got, want := m.Memory.StreamsAtContext, int64(m.Replicas.PlannedStreamsPerReplica); got < want {
			t.Errorf("got %d streams at 2k, want at least the planned %d", got, want)
		}
	})
}
