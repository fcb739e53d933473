package enginesim

import "time"

// seqState is where a sequence is in its life.
type seqState int

const (
	stateNew seqState = iota
	stateWaiting
	stateRunning
	stateFinished // stop or length
	stateAborted  // the client went away
	stateFailed   // the engine died or stopped
)

// sequence is one request inside the engine. All fields but out are owned
// by the core and guarded by its mutex.
type sequence struct {
	prompt    int64 // prompt tokens
	maxTokens int64 // limit on generated tokens: finish "length"
	target    int64 // natural answer length: finish "stop"; ignored with ignoreEOS
	ignoreEOS bool
	gen       *generator

	state     seqState
	generated int64 // tokens emitted so far; kept across preemption
	blocks    int64 // KV blocks held
	scheduled bool  // admitted at least once (queue time observed)

	arrival   time.Time
	lastToken time.Time

	out *output
}

// contextTokens is the KV the sequence holds once computed: prompt and
// every generated token (a preempted sequence recomputes all of them).
func (s *sequence) contextTokens() int64 { return s.prompt + s.generated }
