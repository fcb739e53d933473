package capacity_test

import (
	"errors"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/capacity"
)

func TestReplicasAtPeak(t *testing.T) {
	tests := []struct {
		name                        string
		peak, planned, spare, floor int
		wantForLoad, wantReplicas   int
	}{
		{"reference 8B: 140/32 rounds up to 5, plus a spare", 140, 32, 1, 2, 5, 6},
		{"reference 32B: 50/16 rounds up to 4", 50, 16, 0, 1, 4, 4},
		{"reference 70B: 10/8 rounds up to 2", 10, 8, 0, 0, 2, 2},
		{"exact division is not rounded up", 128, 32, 0, 0, 4, 4},
		{"one stream over needs a whole replica", 33, 32, 0, 0, 2, 2},
		{"the floor wins over a small load", 10, 32, 1, 3, 1, 3},
		{"no load: no spare, only the floor", 0, 32, 1, 2, 0, 2},
		{"no load and no floor: scaled to zero", 0, 8, 1, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotForLoad, gotReplicas := capacity.ReplicasAtPeak(tt.peak, tt.planned, tt.spare, tt.floor)
			if gotForLoad != tt.wantForLoad || gotReplicas != tt.wantReplicas {
				t.Errorf("got %d for load, %d replicas; want %d, %d", gotForLoad, gotReplicas, tt.wantForLoad, tt.wantReplicas)
			}
		})
	}
}

// referenceWorkload returns the reference workload's entry for the model at index i, with
// defaults filled.
func referenceWorkload(i int) capacity.Workload {
	return capacity.ReferenceInput().WithDefaults().Workloads[i]
}

func TestVLLMFlagsMaxNumSeqs(t *testing.T) {
	w8, w32 := referenceWorkload(0), referenceWorkload(1)
	factor1 := w8
	factor1.MaxNumSeqsFactor = 1
	factor3 := w8
	factor3.MaxNumSeqsFactor = 3
	longer := w8
	longer.ContextTokens = 4096
	tests := []struct {
		name string
		w    capacity.Workload
		want int64
	}{
		{"reference 8B: twice the 32 planned, under the 90 at 2k", w8, 2 * 32},
		{"32B: twice 16 is capped by the 28 that fit at 2k", w32, w32.Deployment.KVCapacityTokens() / 2048},
		{"factor 1 runs exactly the planned streams", factor1, 32},
		{"factor 3 is capped by the 90 that fit at 2k", factor3, w8.Deployment.KVCapacityTokens() / 2048},
		{"a longer typical context lowers the cap", longer, w8.Deployment.KVCapacityTokens() / 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := capacity.VLLMFlagsFor(tt.w).MaxNumSeqs; got != tt.want {
				t.Errorf("got --max-num-seqs %d, want %d", got, tt.want)
			}
		})
	}
}

func TestMinTensorParallelSize(t *testing.T) {
	w70 := referenceWorkload(2)
	tight := w70
	tight.PlannedStreamsPerReplica = 40 // 2 GPUs hold about 15 at 2k; 4 hold 135
	tests := []struct {
		name string
		w    capacity.Workload
		want int
	}{
		{"8B fits one L40S", referenceWorkload(0), 1},
		{"32B needs two", referenceWorkload(1), 2},
		{"70B FP8 fits two by memory", w70, 2},
		{"70B FP8 at 40 streams needs four", tight, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := capacity.MinTensorParallelSize(tt.w); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDerivedThroughput(t *testing.T) {
	w := referenceWorkload(1) // docs/requirements.md gives no figure for the 32B
	res, err := capacity.Plan(capacity.Input{Workloads: []capacity.Workload{w}})
	if err != nil {
		t.Fatal(err)
	}
	tp := res.Models[0].Throughput
	// One decoding step emits one token for each of the 16 streams, each
	// holding on average its 1,648-token prompt plus half its 400-token answer.
	step := w.Deployment.DecodeStep(16 * (2048 - 200))
	want := 16 / step.Seconds()
	t.Run("source", func(t *testing.T) {
		if got := tp.Source; got != capacity.SourceDerived {
			t.Errorf("got %q, want %q", got, capacity.SourceDerived)
		}
	})
	t.Run("tokens per second from the decoding step", func(t *testing.T) {
		if got := tp.ReplicaTokensPerSecond; capacity.RoundTo(got, 6) != capacity.RoundTo(want, 6) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("cost per million from it", func(t *testing.T) {
		wantCost := 2 * capacity.L40S.PricePerHour / (want * 3600 / 1e6)
		if got := tp.CostPerMillionFullLoadUSD; capacity.RoundTo(got, 6) != capacity.RoundTo(wantCost, 6) {
			t.Errorf("got %v, want %v", got, wantCost)
		}
	})
}

func TestFleetAndCost(t *testing.T) {
	w8 := referenceWorkload(0)
	onH100 := w8
	onH100.Deployment.GPU = capacity.H100SXM
	onH100.Deployment.Model.Name = "llama-8b-h100"
	onH100.PeakStreams, onH100.MinReplicas, onH100.SpareReplicas = 64, 0, 0 // 2 replicas, 2 GPUs
	mixed := capacity.Input{
		Workloads: []capacity.Workload{w8, onH100}, // 6 L40S, 2 H100
		Fleet: capacity.Fleet{OnPrem: []capacity.OnPremGPUs{
			{GPU: "L40S", Count: 10}, {GPU: "A10G", Count: 4}}},
	}
	overridden := capacity.ReferenceInput()
	overridden.Fleet.CloudPricePerGPUHour = 3
	noAverage := capacity.ReferenceInput()
	noAverage.Fleet.AverageCloudGPUs = 0
	tight := capacity.ReferenceInput()
	tight.Fleet.MonthlyBudgetUSD = 10000
	tests := []struct {
		name string
		in   capacity.Input
		test func(t *testing.T, r capacity.Result)
	}{
		{"owned L40S serve only L40S replicas; H100s are bought", mixed, func(t *testing.T, r capacity.Result) {
			want := []capacity.GPUKindPlan{
				{GPU: "L40S", GPUsAtPeak: 6, OnPremAvailable: 10, OnPremUsed: 6, CloudGPUs: 0, PricePerHourUSD: 2.5},
				{GPU: "H100-SXM", GPUsAtPeak: 2, CloudGPUs: 2, PricePerHourUSD: 6.9, CostPerHourUSD: 2 * 6.9},
				{GPU: "A10G", OnPremAvailable: 4, PricePerHourUSD: 1.0},
			}
			if len(r.Fleet.ByGPU) != len(want) {
				t.Fatalf("got %+v, want %+v", r.Fleet.ByGPU, want)
			}
			for i := range want {
				if r.Fleet.ByGPU[i] != want[i] {
					t.Errorf("kind %d: got %+v, want %+v", i, r.Fleet.ByGPU[i], want[i])
				}
			}
			if got, want := r.Cost.PricePerGPUHourUSD, 6.9; got != want {
				t.Errorf("got blended price %v, want %v (only H100s are cloud)", got, want)
			}
		}},
		{"a fleet price overrides every kind", overridden, func(t *testing.T, r capacity.Result) {
			if got, want := r.Cost.CostPerHourPeakUSD, float64(r.Fleet.CloudGPUs)*3; got != want {
				t.Errorf("got %v USD/hour, want %v", got, want)
			}
			if got, want := r.Models[0].Throughput.ReplicaCostPerHourUSD, 3.0; got != want {
				t.Errorf("got replica %v USD/hour, want %v", got, want)
			}
		}},
		{"no average given: the month at the peak", noAverage, func(t *testing.T, r capacity.Result) {
			if got, want := r.Cost.AverageCloudGPUs, float64(r.Fleet.CloudGPUs); got != want || r.Cost.AverageSource != capacity.AveragePeak {
				t.Errorf("got %v (%s), want %v (%s)", got, r.Cost.AverageSource, want, capacity.AveragePeak)
			}
		}},
		{"over the target", tight, func(t *testing.T, r capacity.Result) {
			if r.Cost.WithinBudget {
				t.Errorf("got within budget at %.0f of %.0f, want over", r.Cost.CostPerMonthUSD, r.Cost.MonthlyBudgetUSD)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := capacity.Plan(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			tt.test(t, r)
		})
	}
}

func TestQueueBudgetWholeRequests(t *testing.T) {
	tests := []struct {
		name       string
		rate       float64
		answer     int64
		replicas   int
		limit      float64
		want, peak int64
	}{
		{"reference 8B: 112.5 requests, 112 start in time", 1500, 400, 6, 30, 112, 675},
		{"an exact product is not lost to rounding", 1200, 300, 1, 30, 120, 120},
		{"float noise under a whole request is absorbed", 410, 100, 1, 30, 123, 123}, // 30 × 4.1 = 122.99999999999999
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := capacity.QueueBudgetFor(tt.rate, 32, tt.answer, tt.replicas, tt.limit)
			if q.BurstRequestsPerReplica != tt.want || q.BurstRequestsAtPeak != tt.peak {
				t.Errorf("got %d per replica, %d at peak; want %d, %d", q.BurstRequestsPerReplica, q.BurstRequestsAtPeak, tt.want, tt.peak)
			}
		})
	}
}

func TestPlanRejects(t *testing.T) {
	base := capacity.ReferenceInput()
	mutate := func(f func(in *capacity.Input)) capacity.Input {
		in := capacity.ReferenceInput()
		in.Workloads = append([]capacity.Workload(nil), base.Workloads...)
		f(&in)
		return in
	}
	tests := []struct {
		name    string
		in      capacity.Input
		wantErr error
	}{
		{"negative activation memory", mutate(func(in *capacity.Input) { in.Workloads[0].Deployment.ActivationBytes = -1 }), capacity.ErrInvalidInput},
		{"answer longer than the context", mutate(func(in *capacity.Input) { in.Workloads[0].AnswerTokens = 4096 }), capacity.ErrInvalidInput},
		{"max-model-len below the context", mutate(func(in *capacity.Input) { in.Workloads[0].MaxModelLen = 1024 }), capacity.ErrInvalidInput},
		{"floor above the cap", mutate(func(in *capacity.Input) { in.Workloads[0].MinReplicas = 9 }), capacity.ErrInvalidInput},
		{"factor below 1", mutate(func(in *capacity.Input) { in.Workloads[0].MaxNumSeqsFactor = 0.5 }), capacity.ErrInvalidInput},
		{"on-prem kind listed twice", mutate(func(in *capacity.Input) {
			in.Fleet.OnPrem = []capacity.OnPremGPUs{{GPU: "L40S", Count: 4}, {GPU: "L40S", Count: 4}}
		}), capacity.ErrInvalidInput},
		{"negative hours", mutate(func(in *capacity.Input) { in.Fleet.HoursPerMonth = -730 }), capacity.ErrInvalidInput},
		{"negative queue limit", mutate(func(in *capacity.Input) { in.Fleet.QueueLimit = -time.Second }), capacity.ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := capacity.Plan(tt.in); !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	res := referencePlan(t)
	over := capacity.ReferenceInput()
	over.Workloads[0].PeakStreams = 400 // 13 + 1 replicas, cap 8
	resOver, err := capacity.Plan(over)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  []string
		want int
	}{
		{"reference 8B: 64 seqs above the 22 at 8k", model(t, res, "llama-8b").Warnings, 1},
		{"reference 70B: 16 seqs under the 33 at 8k", model(t, res, "llama-70b").Warnings, 0},
		{"8B over its max_replicas", model(t, resOver, "llama-8b").Warnings, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.got) != tt.want {
				t.Errorf("got %q, want %d warnings", tt.got, tt.want)
			}
		})
	}
}
