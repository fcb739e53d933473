package routing

import (
	"testing"
	"time"
)

// node returns a candidate with a 100k-token cache and room for 64 streams.
func node(id string, usage float64) Candidate {
	return Candidate{NodeID: id, MaxNumSeqs: 64, KVCapacityTokens: 100_000, KVCacheUsage: usage}
}

// busy marks a candidate as running requests.
func busy(c Candidate) Candidate {
	c.Running = 30
	return c
}

// with applies changes to a candidate.
func with(c Candidate, f func(*Candidate)) Candidate {
	f(&c)
	return c
}

func TestKVAwarePick(t *testing.T) {
	tests := []struct {
		name  string
		cands []Candidate
		need  int64
		want  string // "" for no node
	}{
		{"most free KV wins", []Candidate{node("a", 0.7), node("b", 0.2), node("c", 0.5)}, 2000, "b"},
		{"pending tokens since the beat count", []Candidate{
			with(node("a", 0.1), func(c *Candidate) { c.PendingTokens, c.InFlightTokens, c.InFlight = 40_000, 40_000, 10 }),
			node("b", 0.3)}, 2000, "b"},
		{"reservations bound what the heartbeat cannot see", []Candidate{
			with(node("a", 0.05), func(c *Candidate) { c.InFlightTokens, c.InFlight = 90_000, 30 }),
			node("b", 0.5)}, 2000, "b"},
		{"waiting requests take KV first", []Candidate{
			with(node("a", 0.2), func(c *Candidate) { c.QueueDepth = 20 }), node("b", 0.4)}, 2000, "b"},
		{"a node at max-num-seqs is skipped", []Candidate{
			with(node("a", 0.0), func(c *Candidate) { c.Running = 64 }), node("b", 0.9)}, 2000, "b"},
		{"no room anywhere waits", []Candidate{busy(node("a", 0.99)), busy(node("b", 0.98))}, 8000, ""},
		{"an idle node takes a request bigger than its estimate", []Candidate{
			busy(node("a", 0.99)), with(node("b", 0), func(c *Candidate) { c.KVCapacityTokens = 4000 })}, 8000, "b"},
		{"a local node within 10 % wins", []Candidate{node("a", 0.20), with(node("b", 0.27), func(c *Candidate) { c.Local = true })}, 2000, "b"},
		{"a local node further behind loses", []Candidate{node("a", 0.20), with(node("b", 0.40), func(c *Candidate) { c.Local = true })}, 2000, "a"},
		{"ties go to the lower id", []Candidate{node("b", 0.3), node("a", 0.3)}, 2000, "a"},
		{"unknown capacity is scored by load", []Candidate{
			{NodeID: "a", Running: 5}, {NodeID: "b", Running: 2}}, 2000, "b"},
		{"no candidates", nil, 10, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(KVAware)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if i := p.Pick(tc.cands, tc.need); i >= 0 {
				got = tc.cands[i].NodeID
			}
			if got != tc.want {
				t.Errorf("Pick = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRoundRobinRotatesAndSkipsFull(t *testing.T) {
	p, err := New(RoundRobin)
	if err != nil {
		t.Fatal(err)
	}
	cands := []Candidate{node("a", 0.9), with(node("b", 0), func(c *Candidate) { c.InFlight = 64 }), node("c", 0.9)}
	var got []string
	for range 4 {
		got = append(got, cands[p.Pick(cands, 100)].NodeID)
	}
	if want := []string{"a", "c", "c", "a"}; !equal(got, want) {
		t.Errorf("picks %v, want %v", got, want)
	}
	allFull := []Candidate{with(node("a", 0), func(c *Candidate) { c.Running = 64 })}
	if i := p.Pick(allFull, 100); i != -1 {
		t.Errorf("Pick with every node full = %d, want -1", i)
	}
}

func TestLeastRequestPick(t *testing.T) {
	p, err := New(LeastRequest)
	if err != nil {
		t.Fatal(err)
	}
	cands := []Candidate{
		with(node("a", 0), func(c *Candidate) { c.InFlight = 3 }),
		with(node("b", 0), func(c *Candidate) { c.InFlight = 1; c.QueueDepth = 4 }),
		with(node("c", 0), func(c *Candidate) { c.InFlight = 1 }),
	}
	if got := cands[p.Pick(cands, 100)].NodeID; got != "c" {
		t.Errorf("Pick = %s, want c (fewest in flight, then shortest queue)", got)
	}
}

func TestNewUnknownPolicy(t *testing.T) {
	if _, err := New("random"); err == nil {
		t.Error("New(random) succeeded")
	}
	for _, n := range Names() {
		p, err := New(n)
		if err != nil || p.Name() != n {
			t.Errorf("New(%q) = %v, %v", n, p, err)
		}
	}
}

func TestTracker(t *testing.T) {
	tr := NewTracker()
	beat := time.Unix(100, 0)
	relOld := tr.Assign("a", 1000, beat.Add(-time.Second))
	relNew := tr.Assign("a", 500, beat.Add(time.Second))
	tr.Assign("b", 700, beat)

	c := Candidate{NodeID: "a"}
	tr.Fill(&c, beat)
	if c.InFlight != 2 || c.InFlightTokens != 1500 || c.PendingTokens != 500 {
		t.Errorf("after two assigns: %+v, want 2 in flight, 1500 tokens, 500 pending", c)
	}
	relNew()
	relNew() // twice is harmless
	tr.Fill(&c, beat)
	if c.InFlight != 1 || c.InFlightTokens != 1000 || c.PendingTokens != 0 {
		t.Errorf("after a release: %+v, want 1 in flight, 1000 tokens, 0 pending", c)
	}
	relOld()
	tr.Fill(&c, beat)
	if c.InFlight != 0 || c.InFlightTokens != 0 {
		t.Errorf("after every release: %+v, want nothing in flight", c)
	}
	other := Candidate{NodeID: "b"}
	tr.Fill(&other, beat.Add(time.Minute))
	if other.InFlight != 1 || other.PendingTokens != 0 {
		t.Errorf("node b: %+v, want 1 in flight and nothing since a later beat", other)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFootprint: a sequence holds whole KV blocks.
func TestFootprint(t *testing.T) {
	for _, tt := range []struct{ n, want int64 }{{0, 0}, {1, 16}, {16, 16}, {17, 32}, {1012, 1024}} {
		if got := Footprint(tt.n); got != tt.want {
			t.Errorf("Footprint(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}
