package twin

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels the timeline reads off the twin's objects.
const (
	modelLabel    = "llmplat.io/model"
	nodePoolLabel = "karpenter.sh/nodepool"
)

// Sample is the twin's state at one moment.
type Sample struct {
	// At is the twin time since the recording began.
	At time.Duration
	// Ready and Pods are the model's engine pods that are Ready, and all
	// of them (loading, terminating).
	Ready, Pods map[string]int
	// Nodes counts the nodes of each NodePool; Empty those of them that
	// run no engine pod.
	Nodes map[string]int
	Empty int
	// GPUs sums the GPUs (nvidia.com/gpu capacity) of each NodePool's
	// nodes, what its limits cap.
	GPUs map[string]int64
	// Replicas is the replicas asked of each model's engine Deployments
	// (their specs, summed): the autoscaler's answer, before any pod runs.
	Replicas map[string]int
	// Shapes lists the GPU nodes as "name: instance type (engine pods)".
	Shapes []string
	// Pending is the orchestrators' llmplat_model_pending_requests per
	// model (the highest of the replicas').
	Pending map[string]float64
}

// Request is one request a scenario sent, as its client saw it.
type Request struct {
	Model string
	// Sent, FirstToken and Ended are twin times since the recording
	// began; FirstToken is zero when no token came.
	Sent, FirstToken, Ended time.Duration
	// Status is the final HTTP status; Attempts how many sends it took.
	Status, Attempts int
	// Err is what the client saw when it failed.
	Err string
}

// Event is a named moment of a scenario.
type Event struct {
	At   time.Duration
	What string
}

// Timeline records a scenario: the twin's state every period, the
// requests sent and the scenario's own events.
type Timeline struct {
	c        *Cluster
	p        *Platform
	start    time.Time
	period   time.Duration
	mu       sync.Mutex
	samples  []Sample
	requests []Request
	load     []Request
	events   []Event
}

// Record samples the twin every period until the test ends (or Stop).
func (c *Cluster) Record(tb testing.TB, p *Platform, period time.Duration) *Timeline {
	tb.Helper()
	tl := &Timeline{c: c, p: p, start: time.Now(), period: period}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			tl.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	tb.Cleanup(func() { cancel(); <-done })
	return tl
}

// Now is the twin time since the recording began.
func (tl *Timeline) Now() time.Duration { return time.Since(tl.start) }

// Mark records a scenario's event now.
func (tl *Timeline) Mark(what string) {
	tl.mu.Lock()
	tl.events = append(tl.events, Event{At: tl.Now(), What: what})
	tl.mu.Unlock()
}

// Add records a request.
func (tl *Timeline) Add(r Request) {
	tl.mu.Lock()
	tl.requests = append(tl.requests, r)
	tl.mu.Unlock()
}

// AddLoad records a request of a load test: one of many, drawn as a
// latency series (TTFTOf) rather than listed one by one.
func (tl *Timeline) AddLoad(r Request) {
	tl.mu.Lock()
	tl.load = append(tl.load, r)
	tl.mu.Unlock()
}

// Load returns the load tests' requests recorded so far.
func (tl *Timeline) Load() []Request {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]Request(nil), tl.load...)
}

// Between is a copy of the timeline with what was recorded from from to
// to: a scenario's part of a run, for its picture.
func (tl *Timeline) Between(from, to time.Duration) *Timeline {
	in := func(at time.Duration) bool { return at >= from && at <= to }
	out := &Timeline{c: tl.c, p: tl.p, start: tl.start, period: tl.period}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, s := range tl.samples {
		if in(s.At) {
			out.samples = append(out.samples, s)
		}
	}
	for _, r := range tl.requests {
		if in(r.Sent) {
			out.requests = append(out.requests, r)
		}
	}
	for _, r := range tl.load {
		if in(r.Sent) {
			out.load = append(out.load, r)
		}
	}
	for _, e := range tl.events {
		if in(e.At) {
			out.events = append(out.events, e)
		}
	}
	return out
}

// At is t as a twin time since the recording began.
func (tl *Timeline) At(t time.Time) time.Duration { return t.Sub(tl.start) }

// Samples, Requests and Events return what has been recorded so far.
func (tl *Timeline) Samples() []Sample {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]Sample(nil), tl.samples...)
}

// Requests returns the requests recorded so far.
func (tl *Timeline) Requests() []Request {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]Request(nil), tl.requests...)
}

// Events returns the events recorded so far.
func (tl *Timeline) Events() []Event {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]Event(nil), tl.events...)
}

// Last is the latest sample.
func (tl *Timeline) Last() Sample {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.samples) == 0 {
		return Sample{}
	}
	return tl.samples[len(tl.samples)-1]
}

// sample reads the twin's state once; a failed read leaves a gap.
func (tl *Timeline) sample(ctx context.Context) {
	s := Sample{At: tl.Now(), Ready: map[string]int{}, Pods: map[string]int{}, Nodes: map[string]int{}, Pending: map[string]float64{},
		GPUs: map[string]int64{}, Replicas: map[string]int{}}
	pods, err := tl.c.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: modelLabel})
	if err != nil {
		return
	}
	busy := map[string][]string{}
	for _, p := range pods.Items {
		m := p.Labels[modelLabel]
		busy[p.Spec.NodeName] = append(busy[p.Spec.NodeName], m)
		s.Pods[m]++
		if podReady(&p) && p.DeletionTimestamp == nil {
			s.Ready[m]++
		}
	}
	nodes, err := tl.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodePoolLabel})
	if err != nil {
		return
	}
	deps, err := tl.c.Client.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: modelLabel})
	if err != nil {
		return
	}
	for _, d := range deps.Items {
		n := 1
		if d.Spec.Replicas != nil {
			n = int(*d.Spec.Replicas)
		}
		s.Replicas[d.Labels[modelLabel]] += n
	}
	for _, n := range nodes.Items {
		s.Nodes[n.Labels[nodePoolLabel]]++
		if q, ok := n.Status.Capacity[GPUResource]; ok {
			s.GPUs[n.Labels[nodePoolLabel]] += q.Value()
		}
		if len(busy[n.Name]) == 0 {
			s.Empty++
		}
		s.Shapes = append(s.Shapes, fmt.Sprintf("%s: %s %s (%s)", n.Name, n.Labels[corev1.LabelInstanceTypeStable],
			n.Labels[nodePoolLabel], strings.Join(busy[n.Name], ", ")))
	}
	if tl.p != nil {
		for _, o := range tl.p.Orchestrators {
			for m, v := range scrapeGauge(ctx, "http://"+o.Addr("metrics")+"/metrics", "llmplat_model_pending_requests", "model") {
				s.Pending[m] = max(s.Pending[m], v)
			}
		}
	}
	tl.mu.Lock()
	tl.samples = append(tl.samples, s)
	tl.mu.Unlock()
}

// podReady reports whether pod p's Ready condition is true.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// scrapeGauge reads a gauge's values by one label from a Prometheus text
// exposition at url; nothing when it cannot.
func scrapeGauge(ctx context.Context, url, name, label string) map[string]float64 {
	out := map[string]float64{}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return out
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		labels, value, ok := strings.Cut(line[len(name)+1:], "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(labels, ",") {
			if k, val, ok := strings.Cut(kv, "="); ok && k == label {
				out[strings.Trim(val, `"`)] = v
			}
		}
	}
	return out
}

// Series is one line of a chart: a value per sample.
type Series struct {
	Name  string
	Value func(Sample) float64
}

// ReadyOf, PodsOf, NodesOf and PendingOf are the usual series.
func ReadyOf(model string) Series {
	return Series{model + " ready", func(s Sample) float64 { return float64(s.Ready[model]) }}
}

// PodsOf is the series of a model's engine pods.
func PodsOf(model string) Series {
	return Series{model + " pods", func(s Sample) float64 { return float64(s.Pods[model]) }}
}

// ReplicasOf is the series of the replicas asked of a model's
// Deployments.
func ReplicasOf(model string) Series {
	return Series{model + " asked", func(s Sample) float64 { return float64(s.Replicas[model]) }}
}

// GPUsOf is the series of a NodePool's GPUs.
func GPUsOf(pool string) Series {
	return Series{pool + " GPUs", func(s Sample) float64 { return float64(s.GPUs[pool]) }}
}

// NodesOf is the series of a NodePool's nodes.
func NodesOf(pool string) Series {
	return Series{pool + " nodes", func(s Sample) float64 { return float64(s.Nodes[pool]) }}
}

// EmptyNodes is the series of GPU nodes that run no engine.
func EmptyNodes() Series {
	return Series{"empty GPU nodes", func(s Sample) float64 { return float64(s.Empty) }}
}

// PendingOf is the series of a model's pending gauge.
func PendingOf(model string) Series {
	return Series{model + " pending", func(s Sample) float64 { return s.Pending[model] }}
}

// EventTable is the scenario's events and requests as a Markdown table,
// each moment in twin and real-world seconds.
func (tl *Timeline) EventTable() string {
	type row struct {
		at   time.Duration
		what string
	}
	var rows []row
	for _, e := range tl.Events() {
		rows = append(rows, row{e.At, e.What})
	}
	for _, r := range tl.Requests() {
		what := fmt.Sprintf("request to %s: %d after %d attempt(s)", r.Model, r.Status, r.Attempts)
		if r.FirstToken > 0 {
			what += fmt.Sprintf(", first token at %s", tl.both(r.FirstToken))
		}
		if r.Err != "" {
			what += ": " + r.Err
		}
		rows = append(rows, row{r.Sent, what})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].at < rows[j].at })
	var b strings.Builder
	b.WriteString("| twin s | real s | what |\n|---:|---:|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %.1f | %.0f | %s |\n", r.at.Seconds(), tl.c.Real(r.at).Seconds(), r.what)
	}
	return b.String()
}

// both is a twin time with its real-world equivalent.
func (tl *Timeline) both(d time.Duration) string {
	return fmt.Sprintf("%.1f s (%.0f s real)", d.Seconds(), tl.c.Real(d).Seconds())
}

// secondsDur is s seconds as a duration.
func secondsDur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
