package enginesim

import (
	"hash/fnv"
	"math/rand/v2"

	"github.com/llmplat/llmplat/runtime/openai"
)

// vocabulary is what the simulated model says: each entry is one token (at
// most 8 bytes, no space), so tokens.Count of the generated text equals the
// number of tokens generated.
var vocabulary = [...]string{
	"the", "model", "serves", "tokens", "from", "a", "cache", "of", "keys", "and",
	"values", "while", "each", "step", "reads", "weights", "once", "for", "all", "running",
	"streams", "so", "batching", "grows", "output", "until", "memory", "runs", "out", "then",
	"requests", "wait", "in", "queue", "GPU", "HBM", "sets", "speed", "latency", "is",
	"low", "when", "load", "stays", "under", "budget", "we", "scale", "on", "usage",
	"not", "CPU", "because", "decoding", "mostly", "bound", "by", "moving", "bytes", "fast",
	"answer", "short", "clear", "it",
}

// spaced holds the vocabulary with a leading space: every token after the
// first is written with one.
var spaced = func() [len(vocabulary)]string {
	var s [len(vocabulary)]string
	for i, w := range vocabulary {
		s[i] = " " + w
	}
	return s
}()

// generator writes the deterministic answer of one sequence.
type generator struct {
	rng *rand.Rand
}

// newGenerator seeds a generator from the engine seed and the request: its
// seed field when present, else a hash of the prompt, so the same request
// gets the same answer.
func newGenerator(engineSeed int64, req *openai.ChatCompletionRequest) *generator {
	var reqSeed uint64
	if req.Seed != nil {
		reqSeed = uint64(*req.Seed)
	} else {
		h := fnv.New64a()
		for _, m := range req.Messages {
			h.Write([]byte(m.Role))
			h.Write([]byte{0})
			h.Write([]byte(m.Text()))
			h.Write([]byte{0})
		}
		reqSeed = h.Sum64()
	}
	return &generator{rng: rand.New(rand.NewPCG(uint64(engineSeed), reqSeed))}
}

// answerLength draws the natural answer length, uniform in
// [mean/2, mean/2 + mean], at least 1.
func (g *generator) answerLength(mean int64) int64 {
	n := mean/2 + g.rng.Int64N(mean+1)
	return max(n, 1)
}

// next returns the text of the next token: a word, with a leading space
// unless it is the first.
func (g *generator) next(first bool) string {
	i := g.rng.IntN(len(vocabulary))
	if first {
		return vocabulary[i]
	}
	return spaced[i]
}
