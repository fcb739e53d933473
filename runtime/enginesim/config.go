package enginesim

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// Defaults a Config takes for fields left zero.
const (
	// DefaultProfile is the model most teams use: the reference workload's 8B on an L40S.
	DefaultProfile = "llama-8b"
	// DefaultMaxNumSeqs is vLLM's --max-num-seqs default on GPUs other than
	// H100/H200.
	DefaultMaxNumSeqs = 256
	// DefaultMaxModelLen is the reference workload's --max-model-len for the 8B.
	DefaultMaxModelLen = 8192
	// DefaultMaxNumBatchedTokens is vLLM's per-step token budget for online
	// serving on GPUs under 70 GiB: it bounds how many prompts one step
	// prefills, so a burst of arrivals does not stall running streams for
	// seconds.
	DefaultMaxNumBatchedTokens = 2048
	// DefaultMeanAnswerTokens is the reference workload's typical 400-token answer.
	DefaultMeanAnswerTokens = 400
	// DefaultTimeScale runs in real time.
	DefaultTimeScale = 1.0
)

// Config is everything a simulator needs. The zero value, once defaulted,
// is the reference workload's 8B on one L40S running in real time.
type Config struct {
	// Deployment is the model and hardware; zero means the DefaultProfile.
	Deployment capacity.Deployment
	// ServedModelName is the model name clients must ask for and metrics
	// report; empty means the deployment model's served name.
	ServedModelName string
	// MaxModelLen is the longest context (prompt plus answer) accepted.
	MaxModelLen int64
	// MaxNumSeqs is the most sequences running at once.
	MaxNumSeqs int
	// MaxNumBatchedTokens bounds the prompt tokens prefilled in one step;
	// a step always admits at least one waiting sequence that fits in KV.
	MaxNumBatchedTokens int64
	// MeanAnswerTokens is the mean of the natural answer length, drawn
	// uniformly from [mean/2, 3·mean/2].
	MeanAnswerTokens int64
	// Seed makes generated text, answer lengths and the error-rate fault
	// reproducible.
	Seed int64
	// LoadTime is how long (simulated) the engine loads before /health
	// turns 200 once Run starts.
	LoadTime time.Duration
	// Faults are the injected faults at start.
	Faults Faults

	// Clock is the simulated time source; nil means a ScaledClock at TimeScale.
	Clock Clock
	// TimeScale is how many times faster than real time the default clock
	// runs; zero means DefaultTimeScale.
	TimeScale float64
	// WallClock stamps the created field of responses; nil means time.Now.
	WallClock func() time.Time
	// NewID returns a completion id ("chatcmpl-" and 32 hex digits); it must
	// be safe for concurrent use. Nil means random ids.
	NewID func() string
}

// withDefaults returns c with every zero field set.
func (c Config) withDefaults() Config {
	if c.Deployment.Model.Name == "" {
		c.Deployment, _ = Profile(DefaultProfile) // a built-in profile always exists
	}
	c.Deployment = c.Deployment.WithDefaults()
	if c.ServedModelName == "" {
		c.ServedModelName = c.Deployment.Model.ServedName
	}
	if c.ServedModelName == "" {
		c.ServedModelName = c.Deployment.Model.Name
	}
	if c.MaxModelLen == 0 {
		c.MaxModelLen = DefaultMaxModelLen
	}
	if c.MaxNumSeqs == 0 {
		c.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if c.MaxNumBatchedTokens == 0 {
		c.MaxNumBatchedTokens = DefaultMaxNumBatchedTokens
	}
	if c.MeanAnswerTokens == 0 {
		c.MeanAnswerTokens = DefaultMeanAnswerTokens
	}
	if c.TimeScale == 0 {
		c.TimeScale = DefaultTimeScale
	}
	if c.Clock == nil {
		c.Clock = NewScaledClock(c.TimeScale)
	}
	if c.WallClock == nil {
		c.WallClock = time.Now
	}
	if c.NewID == nil {
		c.NewID = randomID
	}
	return c
}

// validate checks a defaulted config, including that one request of
// MaxModelLen tokens fits in the KV cache, as vLLM checks at start.
func (c Config) validate() error {
	if err := c.Deployment.Validate(); err != nil {
		return fmt.Errorf("deployment: %w", err)
	}
	switch {
	case c.MaxModelLen < 2:
		return fmt.Errorf("max_model_len must be at least 2, got %d", c.MaxModelLen)
	case c.MaxNumSeqs < 1:
		return fmt.Errorf("max_num_seqs must be at least 1, got %d", c.MaxNumSeqs)
	case c.MaxNumBatchedTokens < 1:
		return fmt.Errorf("max_num_batched_tokens must be at least 1, got %d", c.MaxNumBatchedTokens)
	case c.MeanAnswerTokens < 1:
		return fmt.Errorf("mean_answer_tokens must be at least 1, got %d", c.MeanAnswerTokens)
	case c.TimeScale <= 0:
		return fmt.Errorf("time_scale must be positive, got %g", c.TimeScale)
	case c.LoadTime < 0:
		return fmt.Errorf("load_time must not be negative, got %s", c.LoadTime)
	}
	if kv := c.Deployment.KVCapacityTokens(); c.MaxModelLen > kv {
		return fmt.Errorf("%w: max_model_len %d is more than the KV cache holds (%d tokens); lower max_model_len or raise gpu_memory_utilization",
			errKVTooSmall, c.MaxModelLen, kv)
	}
	return c.Faults.Validate()
}

var errKVTooSmall = errors.New("kv cache too small")

// Profile returns the reference deployment of a built-in model on L40S by its
// short name: "llama-8b", "qwen-32b" or "llama-70b".
func Profile(name string) (capacity.Deployment, error) {
	for _, d := range capacity.ReferenceDeployments() {
		if d.Model.Name == name {
			return d, nil
		}
	}
	return capacity.Deployment{}, fmt.Errorf("%w %q (built-in: %v)", ErrUnknownProfile, name, ProfileNames())
}

// ErrUnknownProfile is returned by Profile for a name it does not know.
var ErrUnknownProfile = errors.New("unknown profile")

// ProfileNames lists the built-in profiles.
func ProfileNames() []string {
	var names []string
	for _, d := range capacity.ReferenceDeployments() {
		names = append(names, d.Model.Name)
	}
	sort.Strings(names)
	return names
}

// randomID returns a vLLM-style completion id from crypto randomness.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "chatcmpl-" + hex.EncodeToString(b[:])
}
