package enginesim

import (
	"context"
	"fmt"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// plannerCase is a deployment as the planner sizes it: its workload and the
// planner's streams per replica at the workload's typical context.
type plannerCase struct {
	name     string
	workload capacity.Workload
	streams  int64
}

// plannerCases plans the reference workload and one custom profile (the reference workload's
// 8B on an H100, from the built-in profiles) and returns each workload with
// the streams per replica the plan shows for it.
func plannerCases(t *testing.T) []plannerCase {
	t.Helper()
	ref := capacity.ReferenceInput()
	custom := capacity.Input{Workloads: []capacity.Workload{{
		Deployment:               capacity.Deployment{Model: capacity.Llama8B, GPU: capacity.H100SXM, TP: 1},
		PeakStreams:              120,
		PlannedStreamsPerReplica: 64,
	}}}
	var cases []plannerCase
	for _, in := range []struct {
		label string
		input capacity.Input
	}{{"reference", ref}, {"custom", custom}} {
		res, err := capacity.Plan(in.input)
		if err != nil {
			t.Fatalf("plan %s: %v", in.label, err)
		}
		for i, w := range in.input.WithDefaults().Workloads {
			mp := res.Models[i]
			cases = append(cases, plannerCase{
				name:     fmt.Sprintf("%s %s on %d × %s", in.label, mp.Model, mp.Replicas.GPUsPerReplica, mp.GPU),
				workload: w,
				streams:  mp.Memory.StreamsAtContext,
			})
		}
	}
	return cases
}

// probeAnswerTokens is the answer length of a probe's sequences: the KV
// cache fills by context (prompt plus answer), not by how it is split, and a
// short answer keeps each probe to that many steps.
const probeAnswerTokens = 128

// preempts drives a fresh simulator of the workload's deployment with n
// sequences of the workload's typical context (a prompt of the context less
// probeAnswerTokens, then that many tokens), all submitted at once, and
// reports whether the engine preempted before the first of them finished.
// The prompts leave room to admit more sequences than fit at full context,
// so the batch fills the KV cache as it decodes: the engine preempts exactly
// when n sequences of the full context do not fit.
func preempts(t *testing.T, w capacity.Workload, n int) bool {
	t.Helper()
	cfg := testConfig()
	cfg.Deployment = w.Deployment
	cfg.MaxModelLen = w.MaxModelLen
	cfg.MaxNumSeqs = n                // memory, not --max-num-seqs, is the limit probed
	cfg.MaxNumBatchedTokens = 1 << 40 // admit the whole batch in one step
	s := newTestSim(t, cfg)
	submitN(t, s, n, w.ContextTokens-probeAnswerTokens, probeAnswerTokens)
	ctx := context.Background()
	for {
		st := s.Stats()
		switch {
		case st.Preemptions > 0:
			return true
		case st.Finished > 0:
			return false
		}
		if _, ok := s.Step(ctx); !ok {
			t.Fatalf("%d sequences: engine idle before any finished", n)
		}
	}
}

// firstPreempting returns the smallest number of concurrent sequences at
// which the simulator preempts: it doubles the batch until the engine
// preempts, then bisects between the last batch that did not and the first
// that did. It checks the ends it settles on.
func firstPreempting(t *testing.T, w capacity.Workload) int {
	t.Helper()
	held, over := 0, 1
	for !preempts(t, w, over) {
		held, over = over, over*2
		if over > 1<<14 {
			t.Fatalf("no preemption with %d sequences", over)
		}
	}
	for over-held > 1 {
		mid := (held + over) / 2
		if preempts(t, w, mid) {
			over = mid
		} else {
			held = mid
		}
	}
	if held > 0 && preempts(t, w, held) {
		t.Fatalf("%d sequences preempt, but bisection said they fit", held)
	}
	return over
}

// TestSimulatorReproducesPlannerStreams feeds the simulator each planner
// profile and drives it past capacity at the planned context: the batch at
// which it starts preempting, and the largest it holds, must be within 10 %
// of the planner's streams per replica.
func TestSimulatorReproducesPlannerStreams(t *testing.T) {
	const tolerance = 0.10
	for _, tc := range plannerCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			first := firstPreempting(t, tc.workload)
			held := first - 1
			t.Logf("planner: %d streams at %d tokens; simulator holds %d, preempts from %d",
				tc.streams, tc.workload.ContextTokens, held, first)
			if !within(float64(first), float64(tc.streams), tolerance) {
				t.Errorf("preemptions begin at %d sequences, want within 10 %% of the planner's %d", first, tc.streams)
			}
			if !within(float64(held), float64(tc.streams), tolerance) {
				t.Errorf("the engine holds %d sequences, want within 10 %% of the planner's %d", held, tc.streams)
			}
		})
	}
}
