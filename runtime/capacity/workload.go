package capacity

import (
	"errors"
	"fmt"
	"time"
)

// Defaults the planner takes for inputs left zero, each with its reason.
const (
	// DefaultContextTokens is the typical context (prompt plus answer) a
	// stream holds: the reference workload's 2,048-token example and its 2k-token load test.
	DefaultContextTokens = 2048
	// DefaultMaxModelLen is the longest context allowed: the reference workload's
	// vllm-8b flag --max-model-len 8192.
	DefaultMaxModelLen = 8192
	// DefaultAnswerTokens is the answer length of the reference workload's queue budget.
	DefaultAnswerTokens = 400
	// DefaultUtilisation is the reference workload's 50 % use, at which it prices a million tokens.
	DefaultUtilisation = 0.5
	// DefaultMaxNumSeqsFactor is how far --max-num-seqs may exceed the
	// planned streams to absorb a burst while KEDA adds replicas: the
	// reference workload sets 64 for 32 planned streams.
	DefaultMaxNumSeqsFactor = 2.0
	// DefaultHoursPerMonth is 8,760 hours a year over 12 months, the reference workload's 730.
	DefaultHoursPerMonth = 730.0
	// DefaultQueueLimit is the gateway's per-model queue limit: a request
	// that waits longer gets 503 (the required 30 seconds).
	DefaultQueueLimit = 30 * time.Second
)

// Sentinel errors of the planner, for errors.Is.
var (
	// ErrInvalidInput marks an input field that is missing or impossible.
	ErrInvalidInput = errors.New("invalid plan input")
	// ErrMaxModelLenTooLong is returned when one sequence of max-model-len
	// tokens does not fit the KV cache; vLLM refuses to start then.
	ErrMaxModelLenTooLong = errors.New("max-model-len does not fit the KV cache")
	// ErrPlannedStreamsDoNotFit is returned when the KV cache cannot hold
	// the planned streams per replica at the typical context.
	ErrPlannedStreamsDoNotFit = errors.New("planned streams do not fit the KV cache")
)

// Workload is one model's share of the peak traffic and how it is served.
type Workload struct {
	// Deployment is one replica: model, GPU, TP and engine settings.
	Deployment Deployment
	// PeakStreams is the model's concurrent streams at peak (the reference workload: 140,
	// 50 and 10 of 200).
	PeakStreams int
	// PlannedStreamsPerReplica is the batch a replica is planned to run,
	// below what memory allows, for latency headroom (the reference workload: 32 for 8B,
	// 16 for 32B, 8 for 70B).
	PlannedStreamsPerReplica int
	// ContextTokens is the typical context of a stream, prompt plus answer.
	ContextTokens int64
	// MaxModelLen is the longest context a request may have (--max-model-len).
	MaxModelLen int64
	// AnswerTokens is the typical answer length, for the queue budget.
	AnswerTokens int64
	// MinReplicas is the warm floor (the reference workload's vllm-8b keeps 2).
	MinReplicas int
	// MaxReplicas is the Deployment's cap; a plan above it gets a warning.
	// Zero means no cap.
	MaxReplicas int
	// SpareReplicas are added on top of the replicas the load needs, when
	// there is load: the reference workload runs 8B on spot capacity and keeps one spare so
	// a reclaimed replica does not leave the peak unserved (140 streams need
	// 5 replicas of 32, the reference workload plans 6).
	SpareReplicas int
	// Spot allows spot capacity as well as on-demand (the reference workload: the 8B),
	// for the vCPU quota of each.
	Spot bool
	// ReplicaTokensPerSecond is the output tokens per second of one replica
	// across its batch at the planned streams, measured or assumed (the
	// reference workload: 1,500 for 8B, 300 for 70B). Zero derives it from the
	// deployment's decoding-step model.
	ReplicaTokensPerSecond float64
	// Utilisation is the share of full-load output actually sold, for the
	// cost per million tokens at realistic load.
	Utilisation float64
	// MaxNumSeqsFactor bounds --max-num-seqs to this multiple of the
	// planned streams (see VLLMFlagsFor).
	MaxNumSeqsFactor float64
}

// WithDefaults returns w with every zero field set to its default.
func (w Workload) WithDefaults() Workload {
	w.Deployment = w.Deployment.WithDefaults()
	if w.ContextTokens == 0 {
		w.ContextTokens = DefaultContextTokens
	}
	if w.MaxModelLen == 0 {
		w.MaxModelLen = DefaultMaxModelLen
	}
	if w.AnswerTokens == 0 {
		w.AnswerTokens = DefaultAnswerTokens
	}
	if w.Utilisation == 0 {
		w.Utilisation = DefaultUtilisation
	}
	if w.MaxNumSeqsFactor == 0 {
		w.MaxNumSeqsFactor = DefaultMaxNumSeqsFactor
	}
	return w
}

// Validate checks w after defaults, including that the deployment fits.
func (w Workload) Validate() error {
	if err := w.Deployment.Validate(); err != nil {
		return err
	}
	name := w.Deployment.Model.Name
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: "+format, append([]any{name, ErrInvalidInput}, args...)...)
	}
	switch {
	case w.Deployment.ActivationBytes < 0:
		return bad("activation memory must not be negative, got %g bytes", w.Deployment.ActivationBytes)
	case w.PeakStreams < 0:
		return bad("peak_streams must not be negative, got %d", w.PeakStreams)
	case w.PlannedStreamsPerReplica < 1:
		return bad("planned_streams_per_replica must be at least 1, got %d", w.PlannedStreamsPerReplica)
	case w.ContextTokens < 1:
		return bad("context_tokens must be at least 1, got %d", w.ContextTokens)
	case w.MaxModelLen < w.ContextTokens:
		return bad("max_model_len %d is below context_tokens %d", w.MaxModelLen, w.ContextTokens)
	case w.AnswerTokens < 1 || w.AnswerTokens > w.ContextTokens:
		return bad("answer_tokens must be in [1, context_tokens %d], got %d", w.ContextTokens, w.AnswerTokens)
	case w.MinReplicas < 0 || w.SpareReplicas < 0 || w.MaxReplicas < 0:
		return bad("min_replicas, max_replicas and spare_replicas must not be negative")
	case w.MaxReplicas > 0 && w.MinReplicas > w.MaxReplicas:
		return bad("min_replicas %d is above max_replicas %d", w.MinReplicas, w.MaxReplicas)
	case w.ReplicaTokensPerSecond < 0:
		return bad("replica_output_tokens_per_second must not be negative, got %g", w.ReplicaTokensPerSecond)
	case w.Utilisation <= 0 || w.Utilisation > 1:
		return bad("utilisation must be in (0, 1], got %g", w.Utilisation)
	case w.MaxNumSeqsFactor < 1:
		return bad("max_num_seqs_factor must be at least 1, got %g", w.MaxNumSeqsFactor)
	}
	d := w.Deployment
	if capTokens := d.KVCapacityTokens(); capTokens < w.MaxModelLen {
		return fmt.Errorf("%s on %d × %s: %w: %d tokens asked, the KV cache holds %d",
			name, d.TP, d.GPU.Name, ErrMaxModelLenTooLong, w.MaxModelLen, capTokens)
	}
	if fit := d.KVCapacityTokens() / w.ContextTokens; int64(w.PlannedStreamsPerReplica) > fit {
		return fmt.Errorf("%s on %d × %s: %w: %d planned at %d tokens, the KV cache holds %d",
			name, d.TP, d.GPU.Name, ErrPlannedStreamsDoNotFit, w.PlannedStreamsPerReplica, w.ContextTokens, fit)
	}
	return nil
}

// OnPremGPUs is a count of owned GPUs of one kind; they serve before any
// cloud GPU of the same kind is bought.
type OnPremGPUs struct {
	GPU   string
	Count int
}

// Fleet is what the plan may use and how its cost is counted.
type Fleet struct {
	// OnPrem lists the owned GPUs by kind (the reference workload: 8 L40S).
	OnPrem []OnPremGPUs
	// CloudPricePerGPUHour, when positive, is the USD price of one cloud
	// GPU-hour for every kind; zero takes each GPU profile's PricePerHour.
	CloudPricePerGPUHour float64
	// AverageCloudGPUs is the cloud GPUs running on average over a month
	// (the reference workload: 8). Zero takes the peak count, an upper bound.
	AverageCloudGPUs float64
	// HoursPerMonth turns an hourly cost into a monthly one.
	HoursPerMonth float64
	// QueueLimit is how long a request may wait in the model queue.
	QueueLimit time.Duration
	// MonthlyBudgetUSD is the target the monthly cost is checked against
	// (the reference workload: 20,000). Zero means no target.
	MonthlyBudgetUSD float64
}

// WithDefaults returns f with every zero field set to its default.
func (f Fleet) WithDefaults() Fleet {
	if f.HoursPerMonth == 0 {
		f.HoursPerMonth = DefaultHoursPerMonth
	}
	if f.QueueLimit == 0 {
		f.QueueLimit = DefaultQueueLimit
	}
	return f
}

// Validate checks f after defaults.
func (f Fleet) Validate() error {
	seen := map[string]bool{}
	for _, o := range f.OnPrem {
		switch {
		case o.GPU == "":
			return fmt.Errorf("fleet: %w: on_prem entry without a gpu", ErrInvalidInput)
		case o.Count < 0:
			return fmt.Errorf("fleet: %w: on_prem %s count must not be negative, got %d", ErrInvalidInput, o.GPU, o.Count)
		case seen[o.GPU]:
			return fmt.Errorf("fleet: %w: on_prem lists %s twice", ErrInvalidInput, o.GPU)
		}
		seen[o.GPU] = true
	}
	switch {
	case f.CloudPricePerGPUHour < 0:
		return fmt.Errorf("fleet: %w: cloud_price_usd_per_gpu_hour must not be negative", ErrInvalidInput)
	case f.AverageCloudGPUs < 0:
		return fmt.Errorf("fleet: %w: average_cloud_gpus must not be negative", ErrInvalidInput)
	case f.HoursPerMonth <= 0:
		return fmt.Errorf("fleet: %w: hours_per_month must be positive", ErrInvalidInput)
	case f.QueueLimit <= 0:
		return fmt.Errorf("fleet: %w: queue_limit_seconds must be positive", ErrInvalidInput)
	case f.MonthlyBudgetUSD < 0:
		return fmt.Errorf("fleet: %w: monthly_budget_usd must not be negative", ErrInvalidInput)
	}
	return nil
}

// Input is everything a plan is made from.
type Input struct {
	Workloads []Workload
	Fleet     Fleet
}

// WithDefaults returns in with defaults filled in every workload and the fleet.
func (in Input) WithDefaults() Input {
	ws := make([]Workload, len(in.Workloads))
	for i, w := range in.Workloads {
		ws[i] = w.WithDefaults()
	}
	return Input{Workloads: ws, Fleet: in.Fleet.WithDefaults()}
}

// Validate checks in after defaults: at least one workload, one workload a
// model, and each workload and the fleet valid.
func (in Input) Validate() error {
	if len(in.Workloads) == 0 {
		return fmt.Errorf("%w: no workloads", ErrInvalidInput)
	}
	seen := map[string]bool{}
	for _, w := range in.Workloads {
		if err := w.Validate(); err != nil {
			return err
		}
		if seen[w.Deployment.Model.Name] {
			return fmt.Errorf("%w: model %s has two workloads", ErrInvalidInput, w.Deployment.Model.Name)
		}
		seen[w.Deployment.Model.Name] = true
	}
	return in.Fleet.Validate()
}
