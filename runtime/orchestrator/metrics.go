package orchestrator

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmplat/llmplat/runtime/registry"
)

// pendingTimeout bounds the reads behind the pending gauge at a scrape.
const pendingTimeout = 2 * time.Second

// Metrics are the orchestrator's Prometheus metrics. Labels are bounded:
// model (declared models), policy, node state, result and reason.
type Metrics struct {
	reg           prometheus.Registerer
	nodes         *prometheus.GaugeVec
	registrations *prometheus.CounterVec
	reconnects    prometheus.Counter
	deaths        prometheus.Counter
	routing       *prometheus.CounterVec
	retries       *prometheus.CounterVec
	unknownFrames prometheus.Counter
	cloudDrains   prometheus.Counter
	donesRefused  prometheus.Counter
	invalidText   prometheus.Counter
	onPremTokens  prometheus.Counter
}

// NewMetrics registers the orchestrator's metrics on reg; nil means a
// private registry.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		reg: reg,
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmplat_orchestrator_nodes",
			Help: "Nodes in the registry by state (active, draining, unhealthy), as this replica last read it."}, []string{"state"}),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_orchestrator_registrations_total",
			Help: "Node registrations by result: accepted, or the reason for refusing."}, []string{"result"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmplat_orchestrator_reconnects_total",
			Help: "Accepted registrations of nodes that had registered before."}),
		deaths: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmplat_orchestrator_node_deaths_total",
			Help: "Node records that expired without a departure."}),
		routing: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_orchestrator_routing_decisions_total",
			Help: "Routing decisions by policy, model and result (local, remote, cloud, no_capacity)."}, []string{"policy", "model", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_orchestrator_retries_total",
			Help: "Requests retried on another node after their node was lost before the first event."}, []string{"model"}),
		unknownFrames: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmplat_nodeproto_unknown_frames_total",
			Help: "Frames of an unknown type from nodes, ignored."}),
		cloudDrains: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmplat_orchestrator_cloud_drains_total",
			Help: "Cloud nodes this replica drained because their Kubernetes Node is being disrupted (the controller's leader only)."}),
		donesRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmplat_orchestrator_dones_refused_total",
			Help: "Done frames not recorded because their request was never assigned to the node that sent them."}),
		invalidText: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmplat_orchestrator_invalid_utf8_frames_total",
			Help: "Frames from nodes with invalid UTF-8, whose invalid bytes were replaced by U+FFFD."}),
		onPremTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmplat_orchestrator_onprem_completion_tokens_total",
			Help: "Completion tokens on-premises nodes reported in the done frames of the requests they served, once per request " +
				"(on the replica holding the node's socket): the engines Prometheus cannot scrape, for the LedgerDrift alert."}),
	}
	reg.MustRegister(m.nodes, m.registrations, m.reconnects, m.deaths, m.routing, m.retries, m.unknownFrames, m.cloudDrains,
		m.donesRefused, m.invalidText, m.onPremTokens)
	for _, s := range []string{"active", "draining", "unhealthy"} {
		m.nodes.WithLabelValues(s)
	}
	return m
}

// cloudDrained counts n cloud nodes drained.
func (m *Metrics) cloudDrained(n int) {
	if m != nil {
		m.cloudDrains.Add(float64(n))
	}
}

// onPremCompleted counts the completion tokens of an on-prem node's done
// frame for a request it was serving.
func (m *Metrics) onPremCompleted(tokens int64) {
	if m != nil && tokens > 0 {
		m.onPremTokens.Add(float64(tokens))
	}
}

// attach registers the per-model pending gauge, which reads the replica.
func (m *Metrics) attach(o *Orchestrator) {
	_ = m.reg.Register(pendingCollector{o: o})
}

func (m *Metrics) routed(policy, model, result string) {
	m.routing.WithLabelValues(policy, model, result).Inc()
}

// countNodes sets the node gauges from a snapshot.
func (m *Metrics) countNodes(nodes []registry.Node, now time.Time) {
	var active, draining, unhealthy float64
	for _, n := range nodes {
		switch {
		case n.State == registry.StateDraining:
			draining++
		case n.Healthy(now):
			active++
		default:
			unhealthy++
		}
	}
	m.nodes.WithLabelValues("active").Set(active)
	m.nodes.WithLabelValues("draining").Set(draining)
	m.nodes.WithLabelValues("unhealthy").Set(unhealthy)
}

// pendingDesc is the per-model pending gauge KEDA scales on.
var pendingDesc = prometheus.NewDesc("llmplat_model_pending_requests",
	"Requests waiting for a model: in the gateways' queue, those waiting for a first event here, "+
		"and those refused while the model was at zero, until a replica is ready. "+
		"It exists for every declared model, with or without a node.", []string{"model"}, nil)

// pendingCollector reads the pending requests per model at each scrape.
type pendingCollector struct{ o *Orchestrator }

func (p pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pendingDesc }

func (p pendingCollector) Collect(ch chan<- prometheus.Metric) {
	for model, n := range p.o.Pending(context.Background()) {
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n), model)
	}
}

// Pending returns the requests waiting per model: every declared model,
// every model a node serves, and every model with a request waiting here.
// A caller refused while its model was at zero counts until a replica of
// the model is ready or its hold passes (package coldstart), so the wake
// signal KEDA reads stays up while the replica loads.
func (o *Orchestrator) Pending(ctx context.Context) map[string]int64 {
	ctx, cancel := context.WithTimeout(ctx, pendingTimeout)
	defer cancel()
	out := map[string]int64{}
	if o.cfg.Models != nil {
		models, err := o.cfg.Models(ctx)
		if err != nil {
			o.cfg.Logger.Warn("declared models not read for the pending gauge", "err", err)
		}
		for _, m := range models {
			out[m] = 0
		}
	}
	for _, n := range o.snap.Load().nodes {
		for _, s := range n.Models {
			out[s.Name] += 0
		}
	}
	o.mu.Lock()
	for m, n := range o.awaiting {
		out[m] += int64(n)
	}
	o.mu.Unlock()
	if o.cfg.Pending != nil {
		for m := range out {
			n, err := o.cfg.Pending(ctx, m)
			if err != nil {
				o.cfg.Logger.Warn("queue depth not read for the pending gauge", "model", m, "err", err)
				continue
			}
			out[m] += n
		}
	}
	for m := range out {
		out[m] += o.held(ctx, m)
	}
	return out
}
