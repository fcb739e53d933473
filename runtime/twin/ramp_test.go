package twin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/loadgen"
)

// modelStreams is one model's share of a load: its concurrent streams.
type modelStreams struct {
	model   string
	streams int
}

// referenceLoad is the reference load test (docs/requirements.md,
// "Proof"): 200 concurrent streams, 140 / 50 / 10 across the three
// models.
var referenceLoad = []modelStreams{{"llama-8b", 140}, {"qwen-32b", 50}, {"llama-70b", 10}}

const (
	// referencePromptTokens is the reference load's prompt: 2k tokens.
	referencePromptTokens = 2048
	// loadAnswerTokens is every load answer's length, run to its cap
	// (ignore_eos) at the twin's models' longest answer: long streams
	// hold the concurrency with few requests, which the twin's machine
	// carries at Scale× the real-world rate.
	loadAnswerTokens = 1024
	// closedLoop is an arrival rate no cap on concurrency lets through:
	// each stream's next request leaves as its last ends.
	closedLoop = 1e6
	// rampUp is the climb from the floors to the peak: a morning's
	// arrivals in an hour. A floor absorbs the growth over one cold start
	// of its model (the 32B's 1,086 s with a poll: 15 of its 50 streams
	// here) in its headroom while the replica KEDA asks for loads; a
	// climb that outgrows the floor within a cold start (the 32B's floor
	// of 1 holds 18 of these 3k-token streams in its 57,760 tokens of KV
	// cache) needs a higher floor, which no autoscaler replaces.
	rampUp = time.Hour
	// rampPeak is how long the peak holds: past the slowest cold start
	// (the 70B's 1,116 s) and its node's launch, so that what KEDA adds
	// serves the peak.
	rampPeak = 30 * time.Minute
	// tailStreams is the 8B's light load after the peak: well below its
	// scaling thresholds, so its replicas above the floor must go while it
	// still serves.
	tailStreams = 10
	// ttftWindow is the window of the pictures' time-to-first-token
	// series.
	ttftWindow = time.Minute
)

// The service level the reference load is judged by (docs/requirements.md,
// "Service levels"): the 8B's time to first token.
const (
	sliModel   = "llama-8b"
	sliTTFTP50 = time.Second
	sliTTFTP95 = 3 * time.Second
)

// scenarioRamp: the reference load test. The load climbs from the warm
// floors to 200 concurrent streams with 2k-token prompts and holds there;
// KEDA adds replicas and Karpenter nodes, and the 70B's ten callers wake
// it from zero. Asserted: KEDA asks for each replica a cold start ahead
// of the load (the ScaledObjects' demand forecast), so no caller waits
// out the gateway's queue limit; nothing fails but the 70B's callers at
// the end of a wake hold, each with a Retry-After; no stream is cut.
// Before the forecast, the 32B's callers were refused at the queue limit
// for as long as its second replica loaded. The load then falls to a few 8B streams: the 8B returns to its
// floor while it still serves (the engine-load triggers'
// activationThreshold), and with no load at all the twin is back at its
// floors with no empty GPU node.
func (r *twinRun) scenarioRamp(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	load := referenceLoad
	total := 0
	for _, m := range load {
		total += m.streams
	}
	before := r.tl.Last()
	began := r.tl.Now()
	cutBefore := r.eng.StreamsCut()
	r.tl.Mark(fmt.Sprintf("the reference load starts: %d streams (%s) in %s", total, describeLoad(load), r.tl.both(r.c.Dur(rampUp))))
	watch := r.watchScaling(before)
	var peak []*driven
	for i, m := range load {
		peak = append(peak, r.drive(ctx, loadgen.Plan{Models: []loadgen.Weighted{{Model: m.model, Weight: 1}},
			Rate: closedLoop, Duration: r.c.Dur(rampUp + rampPeak), Concurrency: m.streams, Ramp: r.c.Dur(rampUp),
			PromptTokens: referencePromptTokens, MaxTokens: loadAnswerTokens, IgnoreEOS: true, Seed: uint64(i + 1)}))
	}
	var finished []loadgen.Finished
	for i, d := range peak {
		if _, err := d.wait(); err != nil {
			t.Fatalf("the reference load of %s: %v", load[i].model, err)
		}
		finished = append(finished, d.Finished()...)
	}
	peakEnd := r.tl.Now()
	r.tl.Mark(fmt.Sprintf("the peak ends: %d streams of %s go on", tailStreams, sliModel))
	stopTail := make(chan struct{})
	tail := r.drive(ctx, loadgen.Plan{Models: []loadgen.Weighted{{Model: sliModel, Weight: 1}}, Rate: closedLoop,
		Duration: r.c.Dur(24 * time.Hour), Concurrency: tailStreams, Stop: stopTail,
		PromptTokens: referencePromptTokens, MaxTokens: loadAnswerTokens, IgnoreEOS: true, Seed: 9})
	r.waitFor(t, 60*time.Minute, fmt.Sprintf("%s back at its floor (%d) while it serves %d streams", sliModel, floors[sliModel], tailStreams),
		func(s Sample) error {
			if n := floors[sliModel]; s.Replicas[sliModel] != n || s.Pods[sliModel] != n || s.Ready[sliModel] != n {
				return fmt.Errorf("%s: %d asked, %d pods, %d ready; want %d", sliModel, s.Replicas[sliModel], s.Pods[sliModel], s.Ready[sliModel], n)
			}
			return nil
		})
	atFloor := r.tl.Now()
	close(stopTail)
	if _, err := tail.wait(); err != nil {
		t.Fatalf("the 8B's light load: %v", err)
	}
	tailDone := tail.Finished()
	r.tl.Mark("the load stops")
	r.waitFor(t, 40*time.Minute, "every model back at its floor", atFloors)
	r.waitFor(t, 20*time.Minute, "at the floors, no GPU node left empty", floorsPacked)
	marks := watch()
	end := r.tl.Now()

	// Judge the load: nothing failed but the requests the gateway
	// refused, each with its Retry-After: at the queue limit, or the 70B's
	// callers at the end of a wake hold. Whether KEDA added replicas
	// before the queue limit was hit is the section's finding, per model.
	refusals := classify(finished)
	for kind, n := range refusals {
		if kind != wakeRefusal && kind != queueRefusal && kind != "ok" {
			t.Errorf("%d requests of the reference load ended %s (the first: %s)", n.count, kind, n.first)
		}
	}
	if n := withoutRetryAfter(finished); n > 0 {
		t.Errorf("%d refusals of the reference load came without a Retry-After", n)
	}
	for _, m := range load {
		if q := classify(only(finished, m.model))[queueRefusal]; q.count > 0 {
			t.Errorf("%s: %d requests waited out the queue limit (%s), the first at %s, the last at %s; KEDA first asked for a replica above its floor at %s",
				m.model, q.count, r.tl.both(r.c.QueueLimit()), r.tl.both(r.tl.At(q.at)), r.tl.both(r.tl.At(q.last)), r.tl.both(marks.asked[m.model]))
		}
	}
	if marks.firstScale == "" || marks.firstNode == "" {
		t.Errorf("the reference load scaled nothing: first replica above a floor %q, first node %q", marks.firstScale, marks.firstNode)
	}
	var tailServed int
	for _, f := range tailDone {
		if f.Err != nil {
			t.Errorf("a request of the 8B's light load failed: %v", f.Err)
		} else if r.tl.At(f.Ended) <= atFloor && r.tl.At(f.Sent) > peakEnd {
			tailServed++
		}
	}
	if tailServed == 0 {
		t.Errorf("no request of the 8B's light load was served before it was back at its floor")
	}
	if cut := r.eng.StreamsCut() - cutBefore; cut != 0 {
		t.Errorf("%d streams cut during the reference load", cut)
	}
	lat := ttftByModel(r, finished, marks.woke)
	if s := lat[sliModel]; s.n > 0 && (s.p50 > sliTTFTP50 || s.p95 > sliTTFTP95) {
		t.Logf("the %s's TTFT p50 %s, p95 %s real: past its service level (p50 ≤ %s, p95 ≤ %s)", sliModel, s.p50, s.p95, sliTTFTP50, sliTTFTP95)
	}
	window := r.tl.Between(began, end)
	r.pictures["reference-load.svg"] = window.SVG("The reference load: 200 streams from the warm floors, then a few", []Panel{
		{"replicas asked (ready)", []Series{ReplicasOf("llama-8b"), ReadyOf("llama-8b"), ReplicasOf("qwen-32b"), ReadyOf("qwen-32b"), ReplicasOf("llama-70b"), ReadyOf("llama-70b")}},
		{"GPU nodes", []Series{NodesOf("gpu-l40s"), NodesOf("gpu-l40s-spot"), EmptyNodes()}},
		{"requests waiting (the pending gauge)", []Series{PendingOf("llama-8b"), PendingOf("qwen-32b"), PendingOf("llama-70b")}},
		{"time to first token, p95 over a minute (real s)", []Series{r.tl.TTFTOf("llama-8b", 0.95, r.c.Dur(ttftWindow)),
			r.tl.TTFTOf("qwen-32b", 0.95, r.c.Dur(ttftWindow)), r.tl.TTFTOf("llama-70b", 0.95, r.c.Dur(ttftWindow))}},
	})
	coldStarts := map[string]time.Duration{}
	for _, m := range load {
		coldStarts[m.model] = r.c.Dur(renderedLoad(t, m.model))
	}
	return r.rampReport(load, total, finished, lat, marks, tailServed, end-began, coldStarts) +
		"\n![the reference load](twin/reference-load.svg)\n\n" + window.EventTable()
}

// describeLoad is "140 llama-8b, 50 qwen-32b, 10 llama-70b".
func describeLoad(load []modelStreams) string {
	var parts []string
	for _, m := range load {
		parts = append(parts, fmt.Sprintf("%d %s", m.streams, m.model))
	}
	return strings.Join(parts, ", ")
}

// scaling is what watchScaling saw: the first replica asked above a
// floor and the first node added (as "model at t"), when each model's
// first replica above its floor turned Ready (the 70B's: its wake), and
// the most replicas asked and nodes run.
type scaling struct {
	firstScale, firstNode string
	asked, woke           map[string]time.Duration
	mostAsked             map[string]int
	mostNodes             map[string]int
}

// watchScaling marks on the timeline, as they happen, each model's first
// replica asked above its floor and first one Ready, and each NodePool's
// first node added, counted from before; stop ends the watch and returns
// what it saw.
func (r *twinRun) watchScaling(before Sample) (stop func() scaling) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	sc := scaling{asked: map[string]time.Duration{}, woke: map[string]time.Duration{}, mostAsked: map[string]int{}, mostNodes: map[string]int{}}
	wg.Go(func() {
		asked, ready, added := map[string]bool{}, map[string]bool{}, map[string]bool{}
		for ctx.Err() == nil {
			s := r.tl.Last()
			for _, m := range slices.Sorted(maps.Keys(floors)) {
				sc.mostAsked[m] = max(sc.mostAsked[m], s.Replicas[m])
				if !asked[m] && s.Replicas[m] > floors[m] {
					asked[m] = true
					sc.asked[m] = s.At
					r.tl.Mark(fmt.Sprintf("%s: KEDA asks for %d replicas (floor %d)", m, s.Replicas[m], floors[m]))
					if sc.firstScale == "" {
						sc.firstScale = fmt.Sprintf("%s at %s", m, r.tl.both(s.At))
					}
				}
				if !ready[m] && s.Ready[m] > floors[m] {
					ready[m] = true
					sc.woke[m] = s.At
					r.tl.Mark(fmt.Sprintf("%s: a replica above its floor ready (%d ready)", m, s.Ready[m]))
				}
			}
			for _, pool := range slices.Sorted(maps.Keys(s.Nodes)) {
				sc.mostNodes[pool] = max(sc.mostNodes[pool], s.Nodes[pool])
				if !added[pool] && s.Nodes[pool] > before.Nodes[pool] {
					added[pool] = true
					r.tl.Mark(fmt.Sprintf("%s: Karpenter adds a node (%d nodes, %d GPUs)", pool, s.Nodes[pool], s.GPUs[pool]))
					if sc.firstNode == "" {
						sc.firstNode = fmt.Sprintf("%s at %s", pool, r.tl.both(s.At))
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(r.tl.period):
			}
		}
	})
	return func() scaling { cancel(); wg.Wait(); return sc }
}

// How a request of a load ended.
const (
	// queueRefusal: 503 for the gateway's queue limit.
	queueRefusal = "503 at the queue limit"
	// wakeRefusal: 503 at the end of the gateway's hold for a model at
	// zero.
	wakeRefusal = "503 at the end of a wake hold"
)

// refusalCount is how many requests ended one way, the first of them and
// when it ended.
type refusalCount struct {
	count    int
	first    string
	at, last time.Time
}

// classify counts the requests by how they ended: "ok", a refusal
// (queueRefusal, wakeRefusal, or "status N"), or a failure after the
// answer began.
func classify(finished []loadgen.Finished) map[string]refusalCount {
	out := map[string]refusalCount{}
	for _, f := range finished {
		kind := endKind(f.Err)
		c := out[kind]
		if c.count == 0 || f.Ended.Before(c.at) {
			c.at = f.Ended
			if f.Err != nil {
				c.first = f.Err.Error()
			}
		}
		if f.Ended.After(c.last) {
			c.last = f.Ended
		}
		c.count++
		out[kind] = c
	}
	return out
}

// only is the requests of model.
func only(finished []loadgen.Finished, model string) []loadgen.Finished {
	var out []loadgen.Finished
	for _, f := range finished {
		if f.Model == model {
			out = append(out, f)
		}
	}
	return out
}

// withoutRetryAfter counts the 503s that came without a Retry-After:
// a refusal must tell its caller when to come back.
func withoutRetryAfter(finished []loadgen.Finished) int {
	n := 0
	for _, f := range finished {
		var refused *loadgen.StatusError
		if errors.As(f.Err, &refused) && refused.Status == http.StatusServiceUnavailable && refused.RetryAfter == "" {
			n++
		}
	}
	return n
}

// endKind names how a request ended.
func endKind(err error) string {
	var refused *loadgen.StatusError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &refused) && refused.Status == http.StatusServiceUnavailable && strings.Contains(string(refused.Body), `"code":"no_capacity"`):
		return queueRefusal
	case errors.As(err, &refused) && refused.Status == http.StatusServiceUnavailable && strings.Contains(string(refused.Body), `"code":"model_loading"`):
		return wakeRefusal
	case errors.As(err, &refused):
		return fmt.Sprintf("status %d", refused.Status)
	}
	return "failed: " + err.Error()
}

// latency is a model's time to first token over a load, real-world.
type latency struct {
	n        int
	p50, p95 time.Duration
	// wake is, for a model at zero when the load began, the time from
	// its first request to its first token: the wake.
	wake time.Duration
}

// ttftByModel is each model's time to first token over the served
// requests, real-world. For a model at zero (woke: when its first
// replica turned Ready) only the requests sent after its wake count; the
// wake is apart.
func ttftByModel(r *twinRun, finished []loadgen.Finished, woke map[string]time.Duration) map[string]latency {
	ttft := map[string][]time.Duration{}
	first, served := map[string]time.Time{}, map[string]time.Time{}
	for _, f := range finished {
		if t, ok := first[f.Model]; !ok || f.Sent.Before(t) {
			first[f.Model] = f.Sent
		}
		if f.Err != nil || f.FirstToken.IsZero() {
			continue
		}
		if t, ok := served[f.Model]; !ok || f.FirstToken.Before(t) {
			served[f.Model] = f.FirstToken
		}
		if w, ok := woke[f.Model]; floors[f.Model] == 0 && (!ok || r.tl.At(f.Sent) < w) {
			continue
		}
		ttft[f.Model] = append(ttft[f.Model], r.c.Real(f.FirstToken.Sub(f.Sent)))
	}
	out := map[string]latency{}
	for m := range floors {
		l := latency{n: len(ttft[m]), p50: loadgen.Quantile(ttft[m], 0.5), p95: loadgen.Quantile(ttft[m], 0.95)}
		if floors[m] == 0 && !served[m].IsZero() {
			l.wake = served[m].Sub(first[m])
		}
		out[m] = l
	}
	return out
}

// rampReport is the reference load's section of the report.
func (r *twinRun) rampReport(load []modelStreams, total int, finished []loadgen.Finished, lat map[string]latency, sc scaling, tailServed int, took time.Duration, coldStarts map[string]time.Duration) string {
	var b strings.Builder
	refusals := classify(finished)
	fmt.Fprintf(&b, "### 1. Reference load\n\n%d concurrent streams (%s), each a 2k-token prompt and a %d-token answer, "+
		"climbing from the warm floors over %s and holding for %s, then %d streams of the %s; at scale %g, %s in all.\n\n",
		total, describeLoad(load), loadAnswerTokens, r.tl.both(r.c.Dur(rampUp)), r.tl.both(r.c.Dur(rampPeak)), tailStreams, sliModel, r.c.Scale, r.tl.both(took))
	fmt.Fprintf(&b, "KEDA's first replica above a floor: %s; Karpenter's first node: %s. Requests refused at the queue limit (%s on the twin's clock): %d of %d.\n\n",
		sc.firstScale, sc.firstNode, r.tl.both(r.c.QueueLimit()), refusals[queueRefusal].count, len(finished))
	b.WriteString("| model | streams | floor | KEDA's first replica above it | its first Ready | most asked | refused at the queue limit | first refusal | last refusal | served | TTFT p50 | TTFT p95 | service level |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	at := func(d time.Duration) string {
		if d == 0 {
			return "never"
		}
		return r.tl.both(d)
	}
	for _, m := range load {
		l, q := lat[m.model], classify(only(finished, m.model))[queueRefusal]
		first, last := "none", "none"
		if q.count > 0 {
			first, last = r.tl.both(r.tl.At(q.at)), r.tl.both(r.tl.At(q.last))
		}
		sli := "none set"
		if m.model == sliModel {
			sli = fmt.Sprintf("p50 ≤ %s, p95 ≤ %s", sliTTFTP50, sliTTFTP95)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %d | %d | %s | %s | %d | %.1f s | %.1f s | %s |\n", m.model, m.streams, floors[m.model],
			at(sc.asked[m.model]), at(sc.woke[m.model]), sc.mostAsked[m.model], q.count, first, last, l.n, l.p50.Seconds(), l.p95.Seconds(), sli)
	}
	b.WriteString("\nTimes are since the twin's recording began; TTFT is real-world (twin × the factor), so the twin's own delays on its busy machine show multiplied by the factor too.\n")
	for _, m := range load {
		q := classify(only(finished, m.model))[queueRefusal]
		asked, ok := sc.asked[m.model]
		if q.count == 0 || !ok {
			continue
		}
		refused := r.tl.At(q.at)
		when := fmt.Sprintf("%s before", r.tl.both(refused-asked))
		if asked > refused {
			when = fmt.Sprintf("only %s after", r.tl.both(asked-refused))
		}
		ready := "was never Ready during the load"
		if woke, ok := sc.woke[m.model]; ok {
			ready = fmt.Sprintf("was Ready only %s after that refusal", r.tl.both(woke-refused))
		}
		fmt.Fprintf(&b, "\nThe %s: KEDA asked for a replica above its floor %s its first request refused at the queue limit, "+
			"but that replica %s (its cold start: %s), and %d of its requests were refused meanwhile: "+
			"the load outgrew what the model ran before that replica could serve.\n",
			m.model, when, ready, r.tl.both(coldStarts[m.model]), q.count)
	}
	for _, m := range load {
		if l := lat[m.model]; l.wake > 0 {
			fmt.Fprintf(&b, "\nThe %s was at zero: its first token came %s after its first request (%d of its requests answered 503 at the end of a wake hold, "+
				"and came back); its TTFT above counts the requests sent once it was awake.\n",
				m.model, r.tl.both(l.wake), classify(only(finished, m.model))[wakeRefusal].count)
		}
	}
	fmt.Fprintf(&b, "\nAfter the peak, %d streams of the %s: it was back at its floor (%d) while it served them (%d requests).\n",
		tailStreams, sliModel, floors[sliModel], tailServed)
	return b.String()
}
