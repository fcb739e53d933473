package enginesim

import (
	"context"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// tinyDeployment has 10 KV blocks of 16 tokens, so scheduling rules show
// in a few steps.
func tinyDeployment() capacity.Deployment {
	m := capacity.Model{Name: "tiny", Params: 1e9, Layers: 1, KVHeads: 1, HeadDim: 64, WeightBytes: 1, KVBytes: 1}
	blockBytes := m.KVBytesPerToken() * 16
	return capacity.Deployment{Model: m, TP: 1, GPUMemoryUtilization: 1, ActivationBytes: 1,
		GPU: capacity.GPU{Name: "toy", MemoryBytes: 1e9 + 1 + 10*blockBytes + 100, BandwidthBytesPerSec: 1e12, FLOPS: 1e14},
	}.WithDefaults()
}

func tinySim(t *testing.T, mutate func(*Config)) *Sim {
	t.Helper()
	cfg := testConfig()
	cfg.Deployment = tinyDeployment()
	cfg.MaxModelLen = 64
	if mutate != nil {
		mutate(&cfg)
	}
	s := newTestSim(t, cfg)
	if got := s.Stats().KVBlocksTotal; got != 10 {
		t.Fatalf("tiny deployment has %d blocks, want 10", got)
	}
	return s
}

func stepN(t *testing.T, s *Sim, n int) {
	t.Helper()
	for i := range n {
		if _, ok := s.Step(context.Background()); !ok {
			t.Fatalf("step %d: nothing to do", i)
		}
	}
}

// TestPreemptionRecomputes walks vLLM's preemption rule through: three
// sequences of 40 prompt tokens take 3 blocks each of 10; at 48 tokens
// each needs a fourth, the newest is preempted to the front of the queue,
// and it comes back when a block-holder finishes, recomputing its prompt
// and the tokens it had made, which it does not send again.
func TestPreemptionRecomputes(t *testing.T) {
	s := tinySim(t, nil)
	seqs := submitN(t, s, 3, 40, 24)
	a, b, c := seqs[0], seqs[1], seqs[2]
	stepN(t, s, 8) // 8 tokens each: 48 tokens, 3 blocks each, 1 free
	if st := s.Stats(); st.Running != 3 || st.KVBlocksUsed != 9 || st.Preemptions != 0 {
		t.Fatalf("after 8 steps: %+v, want 3 running on 9 blocks", st)
	}
	stepN(t, s, 1) // a takes the last block; b needs one: c, the newest, is preempted
	st := s.Stats()
	if st.Preemptions != 1 || st.Running != 2 || st.Waiting != 1 || s.sched.waiting[0] != c {
		t.Fatalf("after the 9th step: %+v, want c preempted to the queue", st)
	}
	if a.generated != 9 || b.generated != 9 || c.generated != 8 || c.blocks != 0 || st.KVBlocksUsed != 8 {
		t.Fatalf("generated a=%d b=%d c=%d, c blocks %d, used %d; want 9 9 8 0 8", a.generated, b.generated, c.generated, c.blocks, st.KVBlocksUsed)
	}
	// a and b run to 24 tokens (64 in context, 4 blocks each); c needs 4
	// blocks to recompute 48 tokens and only 2 are free until they finish.
	stepN(t, s, 15)
	if st := s.Stats(); st.Finished != 2 || c.state != stateWaiting {
		t.Fatalf("after a and b: %+v, c state %d; want both finished and c waiting", st, c.state)
	}
	d, ok := s.Step(context.Background())
	if !ok || c.state != stateRunning {
		t.Fatal("c was not re-admitted")
	}
	dep := tinyDeployment()
	if want := dep.DecodeStep(0) + dep.Prefill(48); d != want {
		t.Errorf("re-admission step took %v, want decode with no KV plus a 48-token prefill: %v", d, want)
	}
	for {
		if _, ok := s.Step(context.Background()); !ok {
			break
		}
	}
	text, n, finish, _ := c.out.take(nil)
	if n != 24 || tokens.Count(string(text)) != 24 || finish != "length" {
		t.Errorf("c sent %d tokens (%d counted), finish %q; want 24, length", n, tokens.Count(string(text)), finish)
	}
}

func TestAdmission(t *testing.T) {
	tests := []struct {
		name        string
		mutate      func(*Config)
		prompts     []int64
		wantRunning []int // after each of the first steps
	}{
		{"token budget admits in order", func(c *Config) { c.MaxNumBatchedTokens = 50 }, []int64{20, 20, 20}, []int{2, 3}},
		{"a prompt over the budget runs alone", func(c *Config) { c.MaxNumBatchedTokens = 10 }, []int64{30, 30}, []int{1, 2}},
		{"max_num_seqs caps the batch", func(c *Config) { c.MaxNumSeqs = 2 }, []int64{5, 5, 5}, []int{2, 2}},
		{"KV blocks cap admission", nil, []int64{50, 50, 50}, []int{2, 2}}, // 4 blocks each of 10
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tinySim(t, tt.mutate)
			for _, p := range tt.prompts {
				submitN(t, s, 1, p, 8)
			}
			for i, want := range tt.wantRunning {
				stepN(t, s, 1)
				if got := s.Stats().Running; got != want {
					t.Errorf("step %d: running %d, want %d", i+1, got, want)
				}
			}
		})
	}
}

// TestStepDuration checks a step's time comes from the capacity model:
// decode over the KV of the running sequences plus the prefill of the
// admitted ones.
func TestStepDuration(t *testing.T) {
	s := tinySim(t, nil)
	submitN(t, s, 2, 20, 8)
	dep := tinyDeployment()
	d1, _ := s.Step(context.Background())
	d2, _ := s.Step(context.Background())
	if want := dep.DecodeStep(0) + dep.Prefill(40); d1 != want {
		t.Errorf("first step %v, want %v", d1, want)
	}
	if want := dep.DecodeStep(2 * 21); d2 != want {
		t.Errorf("second step %v, want %v", d2, want)
	}
}

func TestVocabularyIsOneTokenPerWord(t *testing.T) {
	for _, w := range vocabulary {
		if tokens.Count(w) != 1 || tokens.Count(" "+w) != 1 {
			t.Errorf("vocabulary word %q is not exactly one token", w)
		}
	}
}

// TestAnswerLength checks the natural length: in [mean/2, 3·mean/2], with
// a mean near the configured one.
func TestAnswerLength(t *testing.T) {
	s := newTestSim(t, testConfig())
	var sum int64
	const n = 2000
	for i := range int64(n) {
		seed := i
		job := &chatJob{prompt: 10, maxTokens: 4000}
		job.req.Seed = &seed
		q := s.newSequence(job)
		if q.target < 200 || q.target > 600 {
			t.Fatalf("answer length %d outside [200, 600]", q.target)
		}
		sum += q.target
	}
	if mean := float64(sum) / n; mean < 390 || mean > 410 {
		t.Errorf("mean answer length %.1f, want about 400", mean)
	}
}

// TestFinishReasons runs single sequences to their end: the natural length
// ends with stop, max_tokens with length, ignore_eos runs to max_tokens and
// min_tokens holds a natural stop back.
func TestFinishReasons(t *testing.T) {
	tests := []struct {
		name       string
		maxTokens  int64
		minTokens  int64
		ignoreEOS  bool
		wantFinish string
		wantTokens func(natural int64) int64
	}{
		{"natural stop", 1000, 0, false, "stop", func(n int64) int64 { return n }},
		{"max_tokens first", 5, 0, false, "length", func(int64) int64 { return 5 }},
		{"ignore_eos", 900, 0, true, "length", func(int64) int64 { return 900 }},
		{"min_tokens", 1000, 700, false, "stop", func(int64) int64 { return 700 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestSim(t, testConfig())
			seed := int64(7)
			job := &chatJob{prompt: 10, maxTokens: tt.maxTokens, minTokens: tt.minTokens, ignoreEOS: tt.ignoreEOS}
			job.req.Seed = &seed
			q := s.newSequence(job)
			natural := newGenerator(s.cfg.Seed, &job.req).answerLength(s.cfg.MeanAnswerTokens)
			if err := s.sched.submit(q); err != nil {
				t.Fatal(err)
			}
			for {
				if _, ok := s.Step(context.Background()); !ok {
					break
				}
			}
			text, n, finish, _ := q.out.take(nil)
			if want := tt.wantTokens(natural); n != want || tokens.Count(string(text)) != want || finish != tt.wantFinish {
				t.Errorf("%d tokens (%d counted), finish %q; want %d, %q", n, tokens.Count(string(text)), finish, want, tt.wantFinish)
			}
		})
	}
}

// TestGenerationIsSeeded: the same request seed gives the same text, another
// seed another text.
func TestGenerationIsSeeded(t *testing.T) {
	text := func(seed int64) string {
		s := newTestSim(t, testConfig())
		job := &chatJob{prompt: 10, maxTokens: 20}
		job.req.Seed = &seed
		q := s.newSequence(job)
		if err := s.sched.submit(q); err != nil {
			t.Fatal(err)
		}
		for {
			if _, ok := s.Step(context.Background()); !ok {
				break
			}
		}
		b, _, _, _ := q.out.take(nil)
		return string(b)
	}
	if a, b := text(1), text(1); a != b {
		t.Errorf("seed 1 gave %q then %q", a, b)
	}
	if a, b := text(1), text(2); a == b {
		t.Errorf("seeds 1 and 2 both gave %q", a)
	}
}
