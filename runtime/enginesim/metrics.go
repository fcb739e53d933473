package enginesim

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/llmplat/llmplat/runtime/openai"
)

// Bucket boundaries of vLLM's V1 engine histograms, so that dashboards and
// alerts written for vLLM read the simulator the same way.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
		20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// engineIndex is the value of the engine label: the simulator is one engine.
const engineIndex = "0"

// metrics are the simulator's Prometheus series, with vLLM's names and
// labels. Times are simulated seconds.
type metrics struct {
	promptTokens, generationTokens, preemptions prometheus.Counter
	success                                     map[string]prometheus.Counter
	ttft, itl, e2e, queueTime                   prometheus.Observer
	reqPromptTokens, reqGenerationTokens        prometheus.Observer
}

func newMetrics(reg *prometheus.Registry, cfg Config) *metrics {
	f := promauto.With(reg)
	labels := prometheus.Labels{"model_name": cfg.ServedModelName, "engine": engineIndex}
	counter := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
	}
	histogram := func(name, help string, buckets []float64) prometheus.Observer {
		return f.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
	}
	m := &metrics{
		promptTokens:     counter("vllm:prompt_tokens_total", "Number of prefill tokens processed."),
		generationTokens: counter("vllm:generation_tokens_total", "Number of generation tokens processed."),
		preemptions:      counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine."),
		ttft:             histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets),
		itl:              histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets),
		e2e:              histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestLatencyBuckets),
		queueTime:        histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets),
		reqPromptTokens: histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
			buckets125(cfg.MaxModelLen)),
		reqGenerationTokens: histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
			buckets125(cfg.MaxModelLen)),
	}
	success := f.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total",
		Help: "Count of successfully processed requests.", ConstLabels: labels}, []string{"finished_reason"})
	m.success = map[string]prometheus.Counter{}
	for _, r := range []string{openai.FinishStop, openai.FinishLength, openai.FinishAbort} {
		m.success[r] = success.WithLabelValues(r)
	}
	// vllm:cache_config_info is an info metric: value 1, the cache settings
	// as labels, and (as in vLLM) no model_name label.
	f.NewGauge(prometheus.GaugeOpts{Name: "vllm:cache_config_info", Help: "Information of the LLMEngine CacheConfig",
		ConstLabels: prometheus.Labels{
			"engine":                 engineIndex,
			"block_size":             strconv.Itoa(cfg.Deployment.BlockSize),
			"cache_dtype":            "auto",
			"enable_prefix_caching":  "False",
			"gpu_memory_utilization": strconv.FormatFloat(cfg.Deployment.GPUMemoryUtilization, 'g', -1, 64),
			"num_gpu_blocks":         strconv.FormatInt(cfg.Deployment.KVCapacityBlocks(), 10),
		}}).Set(1)
	return m
}

// stateGauges are the engine's state (requests running and waiting, the
// share of KV blocks in use), read from one snapshot of the scheduler at
// each scrape: set as three separate gauges, a scrape between two of the
// sets could see a request running that holds no KV block yet.
type stateGauges struct {
	snapshot                  func() Stats
	running, waiting, kvUsage *prometheus.Desc
}

func newStateGauges(labels prometheus.Labels, snapshot func() Stats) *stateGauges {
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, labels) }
	return &stateGauges{
		snapshot: snapshot,
		running:  desc("vllm:num_requests_running", "Number of requests in model execution batches."),
		waiting:  desc("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
		kvUsage:  desc("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
	}
}

// Describe implements prometheus.Collector.
func (g *stateGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.running
	ch <- g.waiting
	ch <- g.kvUsage
}

// Collect implements prometheus.Collector.
func (g *stateGauges) Collect(ch chan<- prometheus.Metric) {
	st := g.snapshot()
	var usage float64
	if st.KVBlocksTotal > 0 {
		usage = float64(st.KVBlocksUsed) / float64(st.KVBlocksTotal)
	}
	ch <- prometheus.MustNewConstMetric(g.running, prometheus.GaugeValue, float64(st.Running))
	ch <- prometheus.MustNewConstMetric(g.waiting, prometheus.GaugeValue, float64(st.Waiting))
	ch <- prometheus.MustNewConstMetric(g.kvUsage, prometheus.GaugeValue, usage)
}

// finished records a request that left the engine.
func (m *metrics) finished(s *sequence, reason string, at time.Time) {
	m.success[reason].Inc()
	m.e2e.Observe(at.Sub(s.arrival).Seconds())
	m.reqPromptTokens.Observe(float64(s.prompt))
	m.reqGenerationTokens.Observe(float64(s.generated))
}

// buckets125 returns 1, 2, 5, 10, 20, 50, … up to max, as vLLM builds its
// token-count buckets.
func buckets125(limit int64) []float64 {
	var b []float64
	for scale := int64(1); ; scale *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*scale > limit {
				return b
			}
			b = append(b, float64(m*scale))
		}
	}
}
