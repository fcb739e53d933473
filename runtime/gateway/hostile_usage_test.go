package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/jsonscan"
	oa "github.com/llmplat/llmplat/runtime/openai"
)

// hostile is an engine (or a node speaking for one) that streams the
// chunks given and then reports the usage it likes: issue 40's probe.
type hostile struct {
	contents           []string // one content chunk each
	prompt, completion int64    // the usage it reports
	// running, when set, puts a running usage of this completion count on
	// every content chunk (vLLM's continuous_usage_stats).
	running int64
	// raw, when set, is sent as it is before the finish chunk.
	raw string
}

func (h hostile) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range h.contents {
		text, _ := json.Marshal(c)
		usage := ""
		if h.running != 0 {
			usage = fmt.Sprintf(`,"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, h.prompt, h.running, h.prompt+h.running)
		}
		fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"content":%s}}]%s}`+"\n\n", text, usage)
	}
	if h.raw != "" {
		fmt.Fprint(w, "data: "+h.raw+"\n\n")
	}
	fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
	fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n",
		h.prompt, h.completion, h.prompt+h.completion)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// words is n words of the simulator's kind, " w" after the first.
func words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "w%d", i%1000)
	}
	return b.String()
}

// repeat is n copies of s.
func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// usageBody is a request for llama-8b with prompt as the user's message,
// streamed with its usage (continuous when asked) or not.
func usageBody(prompt string, stream, continuous bool, maxTokens int) string {
	p, _ := json.Marshal(prompt)
	opts := ""
	if stream {
		opts = fmt.Sprintf(`,"stream_options":{"include_usage":true,"continuous_usage_stats":%v}`, continuous)
	}
	return fmt.Sprintf(`{"model":"llama-8b","stream":%v%s,"max_tokens":%d,"messages":[{"role":"user","content":%s}]}`, stream, opts, maxTokens, p)
}

// sseData returns the data of every event of a streamed answer.
func sseData(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.Split(body, "\n\n") {
		if d, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// shownUsage is the usage a client read: the final usage chunk of a
// streamed answer, the usage of a whole one.
func shownUsage(t *testing.T, stream bool, body string) *oa.Usage {
	t.Helper()
	if !stream {
		var resp oa.ChatCompletion
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatalf("answer %s: %v", body, err)
		}
		return resp.Usage
	}
	var last *oa.Usage
	for _, d := range sseData(t, body) {
		var c oa.ChatCompletionChunk
		if json.Unmarshal([]byte(d), &c) == nil && c.Usage != nil && len(c.Choices) == 0 {
			last = c.Usage
		}
	}
	return last
}

// TestImplausibleUsageIsBilledFromTheRelayedText is issue 40's probe, a
// hostile engine behind the gateway: its completion count is billed only
// within the tolerance of the text the gateway relayed, its prompt count
// only from the prompt's words up; otherwise the gateway's own count, or
// the estimate, is billed — and the ledger's row, the usage the client
// reads (streamed and not) and the corrections counted all say the same.
func TestImplausibleUsageIsBilledFromTheRelayedText(t *testing.T) {
	const maxTokens = 4096
	short := "a secret prompt about llamas"
	long := words(3000)
	tests := []struct {
		name           string
		engine         hostile
		prompt         string
		wantPrompt     int64 // -1: the gateway's estimate
		wantCompletion int64
		reason         string
	}{
		// Billed 4,096 before: the reservation.
		{"20 chunks reported as 2^62 tokens", hostile{contents: repeat(" word", 20), prompt: 12, completion: hugeTokens},
			short, 12, 20, "over_reported"},
		// Billed 1 before.
		{"one chunk of 3,750 words reported as 1 token", hostile{contents: []string{words(3750)}, prompt: 12, completion: 1},
			short, 12, 3750, "under_reported"},
		// Billed 1 before.
		{"a prompt of 3,000 words reported as 1 token", hostile{contents: repeat(" word", 5), prompt: 1, completion: 5},
			long, -1, 5, "implausible_prompt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStack(t, stackOpts{engine: tt.engine})
			m := s.meteredGateway()
			team := s.team("alpha", 100*credit)
			key := s.key(adminwire.CreateKeyRequest{TeamID: team})
			for i, stream := range []bool{true, false} {
				req := usageBody(tt.prompt, stream, false, maxTokens)
				resp, body := s.do(key, req)
				if resp.StatusCode != 200 {
					t.Fatalf("stream %v: status %d: %s", stream, resp.StatusCode, body)
				}
				wantPrompt := tt.wantPrompt
				if wantPrompt < 0 {
					wantPrompt = gateway.PromptEstimate(t, req)
				}
				r := s.waitRow(resp.Header.Get("X-Request-Id"))
				if r.status != "settled" || r.from != "exact" || r.prompt != wantPrompt || r.completion != tt.wantCompletion {
					t.Errorf("stream %v: row %+v; want settled at %d + %d tokens", stream, r, wantPrompt, tt.wantCompletion)
				}
				u := shownUsage(t, stream, body)
				if u == nil || u.PromptTokens != r.prompt || u.CompletionTokens != r.completion || u.TotalTokens != r.prompt+r.completion {
					t.Errorf("stream %v: the client read usage %+v; the row bills %d + %d", stream, u, r.prompt, r.completion)
				}
				s.settled()
				if got := corrections(t, m, tt.reason); got != float64(i+1) {
					t.Errorf("stream %v: %s corrections counted %v, want %d", stream, tt.reason, got, i+1)
				}
			}
		})
	}
}

// TestRunningUsageIsShownBounded: a client that asked for the running
// usage on every chunk reads it bounded as the bill would be if the
// stream ended there — never the engine's 2^62, never a total that is
// not the sum of its parts.
func TestRunningUsageIsShownBounded(t *testing.T) {
	const chunks = 6
	s := newStack(t, stackOpts{engine: hostile{contents: repeat(" word", chunks), prompt: 12, completion: chunks, running: hugeTokens}})
	team := s.team("alpha", 100*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	resp, body := s.do(key, usageBody("a secret prompt about llamas", true, true, 100))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	seen := int64(0)
	for _, d := range sseData(t, body) {
		var c oa.ChatCompletionChunk
		if json.Unmarshal([]byte(d), &c) != nil || c.Usage == nil || len(c.Choices) == 0 {
			continue
		}
		seen++
		if u := c.Usage; u.PromptTokens != 12 || u.CompletionTokens != seen || u.TotalTokens != 12+seen {
			t.Errorf("content chunk %d shows usage %+v; want 12 + %d, what was relayed so far", seen, u, seen)
		}
	}
	if seen != chunks {
		t.Errorf("%d content chunks with a usage, want %d: %s", seen, chunks, body)
	}
	if u := shownUsage(t, true, body); u == nil || u.CompletionTokens != chunks || u.TotalTokens != 12+chunks {
		t.Errorf("the final usage %+v, want 12 + %d", u, chunks)
	}
}

// TestDuplicateKeysNeverReachTheClient: an event with two equal keys in
// one object — where the client's reader and the platform's could read
// different text or usage — ends the answer as the engine's failure;
// what was relayed before it is billed, exactly.
func TestDuplicateKeysNeverReachTheClient(t *testing.T) {
	const before = 3
	for _, dup := range []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"content":" hidden","content":" shown"}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2},"usage":{"prompt_tokens":9,"completion_tokens":9,"total_tokens":18}}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}","n\u0061me":"g"}}]}}]}`,
	} {
		t.Run(dup[70:110], func(t *testing.T) {
			s := newStack(t, stackOpts{engine: hostile{contents: repeat(" word", before), prompt: 12, completion: before, raw: dup}})
			team := s.team("alpha", 100*credit)
			key := s.key(adminwire.CreateKeyRequest{TeamID: team})
			for _, stream := range []bool{true, false} {
				resp, body := s.do(key, usageBody("a secret prompt about llamas", stream, false, 100))
				r := s.waitRow(resp.Header.Get("X-Request-Id"))
				if r.status != "settled" || r.from != "partial" || r.completion != before {
					t.Errorf("stream %v: row %+v; want the %d chunks relayed billed as a partial answer", stream, r, before)
				}
				if !stream {
					if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "engine_failed") {
						t.Errorf("status %d: %s; want 502 engine_failed", resp.StatusCode, body)
					}
					continue
				}
				events := sseData(t, body)
				for _, d := range events {
					if dup, _ := jsonscan.DuplicateKey([]byte(d)); dup {
						t.Errorf("the client received %s", d)
					}
				}
				if n := len(events); n < 2 || !strings.Contains(events[n-2], "engine_failed") || events[n-1] != "[DONE]" {
					t.Errorf("the answer ends %q; want an engine_failed error event, then [DONE]", events)
				}
			}
		})
	}
}
