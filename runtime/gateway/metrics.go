package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/llmplat/llmplat/runtime/ledger"
)

// Metrics are the gateway's Prometheus metrics. Labels are bounded: model
// (known models only: unknown ones are refused before any metric), team
// (the teams the platform team declared), status code and reason.
type Metrics struct {
	requests     *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	ttft         *prometheus.HistogramVec
	tokensPerSec *prometheus.HistogramVec
	queueWaitH   *prometheus.HistogramVec
	inFlight     *prometheus.GaugeVec
	reservedMC   *prometheus.CounterVec
	settledMC    *prometheus.CounterVec
	settledTok   *prometheus.CounterVec
	overReserved *prometheus.CounterVec
	capped       *prometheus.CounterVec
	corrected    *prometheus.CounterVec
	early        *prometheus.CounterVec
	admitted     *prometheus.CounterVec
	bodyBytes    prometheus.Gauge
	wakeHeld     *prometheus.GaugeVec
	wakeHolds    *prometheus.HistogramVec
}

// NewMetrics registers the gateway's metrics, and the Go runtime's
// (goroutines among them: the leak alarm), on reg; nil means a private
// registry.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_gateway_requests_total",
			Help: "Chat completions that reached an engine, by model and outcome."}, []string{"model", "outcome"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_gateway_rejections_total",
			Help: "Requests refused before an engine, by reason and HTTP status."}, []string{"reason", "code"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmplat_gateway_time_to_first_token_seconds",
			Help:    "Time from request arrival to the engine's first event.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60}}, []string{"model"}),
		tokensPerSec: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmplat_gateway_stream_tokens_per_second",
			Help:    "Output tokens per second of each finished stream.",
			Buckets: []float64{5, 10, 20, 30, 40, 50, 75, 100, 200}}, []string{"model"}),
		queueWaitH: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmplat_gateway_queue_wait_seconds",
			Help:    "Time requests waited in the model queue.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 20, 30}}, []string{"model"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmplat_gateway_streams_in_flight",
			Help: "Requests currently relaying an engine's answer."}, []string{"model"}),
		reservedMC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_gateway_reserved_microcredits_total",
			Help: "Micro-credits reserved at admission."}, []string{"model", "team"}),
		settledMC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_gateway_settled_microcredits_total",
			Help: "Micro-credits debited at settle."}, []string{"model", "team"}),
		settledTok: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_gateway_settled_tokens_total",
			Help: "Tokens billed at settle, by model and kind (prompt or completion): against the engines' own counters, the ledger's drift."},
			[]string{"model", "kind"}),
		overReserved: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_gateway_over_reservation_total",
			Help: "Streams cut because the engine went past what the request reserved."}, []string{"model"}),
		capped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_gateway_settles_capped_total",
			Help: "Settles whose cost the ledger capped at the reservation: tokens produced beyond it went unbilled."}, []string{"model"}),
		corrected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_gateway_usage_corrected_total",
			Help: "Settles whose reported usage was corrected before billing, by model and reason: under_reported (fewer completion tokens than the relayed text holds: its words, one an event; the gateway's own count was billed), over_reported (more than the relayed text can hold: its bytes, one an event and a margin; the gateway's own count was billed), implausible_prompt (fewer prompt tokens than the prompt's words; the estimate was billed), over_reserved (past the reservation; the bound was billed), negative (counted as zero)."},
			[]string{"model", "reason"}),
		early: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_gateway_early_reservations_total",
			Help: "Reservations that ran while the engine prefilled, by result (held, or refused after the dispatch)."}, []string{"result"}),
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmplat_gateway_quota_admissions_total",
			Help: "Requests the key's limits admitted, by how (redis: a round trip; ticket: on a ticket this replica held)."}, []string{"via"}),
		bodyBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "llmplat_gateway_body_budget_bytes",
			Help: "Weight of the request bodies being read and decoded now, against the body budget (refusals count in llmplat_gateway_rejections_total, reason body_budget)."}),
		wakeHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmplat_gateway_wake_held",
			Help: "Callers held now for a model at zero to wake (their demand is what wakes it)."}, []string{"model"}),
		wakeHolds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmplat_gateway_wake_hold_seconds",
			Help:    "How long callers of a model at zero were held, by how the hold ended: ready (the model woke; the request went on), timed_out (503 with Retry-After), stopping (the gateway shut down), gone (the client left).",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 240, 480}}, []string{"model", "end"}),
	}
	reg.MustRegister(m.requests, m.rejections, m.ttft, m.tokensPerSec, m.queueWaitH, m.inFlight, m.reservedMC, m.settledMC,
		m.settledTok, m.overReserved, m.capped, m.corrected, m.early, m.admitted, m.bodyBytes, m.wakeHeld, m.wakeHolds)
	_ = reg.Register(collectors.NewGoCollector()) // already registered on a shared registry is fine
	return m
}

func (m *Metrics) rejected(reason string, code int) {
	m.rejections.WithLabelValues(reason, strconv.Itoa(code)).Inc()
}

func (m *Metrics) reserved(model, team string, micro int64) {
	m.reservedMC.WithLabelValues(model, team).Add(float64(micro))
}

func (m *Metrics) settled(model, team string, micro int64, u ledger.Usage) {
	m.settledMC.WithLabelValues(model, team).Add(float64(micro))
	m.settledTok.WithLabelValues(model, "prompt").Add(float64(u.PromptTokens))
	m.settledTok.WithLabelValues(model, "completion").Add(float64(u.CompletionTokens))
}

func (m *Metrics) streamStarted(model string) { m.inFlight.WithLabelValues(model).Inc() }
func (m *Metrics) streamEnded(model string)   { m.inFlight.WithLabelValues(model).Dec() }

func (m *Metrics) firstToken(model string, d time.Duration) {
	m.ttft.WithLabelValues(model).Observe(d.Seconds())
}

func (m *Metrics) queueWait(model string, d time.Duration) {
	m.queueWaitH.WithLabelValues(model).Observe(d.Seconds())
}

func (m *Metrics) finished(model string, out Outcome, total time.Duration) {
	m.requests.WithLabelValues(model, out.State.String()).Inc()
	if out.State == Completed && out.CompletionTokens > 0 && total > 0 {
		m.tokensPerSec.WithLabelValues(model).Observe(float64(out.CompletionTokens) / total.Seconds())
	}
}

func (m *Metrics) overReservation(model string) { m.overReserved.WithLabelValues(model).Inc() }

func (m *Metrics) settleCapped(model string) { m.capped.WithLabelValues(model).Inc() }

// bodyBudget moves the body budget's gauge by delta bytes.
func (m *Metrics) bodyBudget(delta int64) { m.bodyBytes.Add(float64(delta)) }

// usageCorrected counts one settle's corrections, once per reason.
func (m *Metrics) usageCorrected(model string, c ledger.Correction) {
	for _, reason := range c.Reasons() {
		m.corrected.WithLabelValues(model, reason).Inc()
	}
}

func (m *Metrics) earlyReservation(held bool) {
	result := "refused"
	if held {
		result = "held"
	}
	m.early.WithLabelValues(result).Inc()
}

func (m *Metrics) quotaAdmitted(onTicket bool) {
	via := "redis"
	if onTicket {
		via = "ticket"
	}
	m.admitted.WithLabelValues(via).Inc()
}
