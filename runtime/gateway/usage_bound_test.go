package gateway_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
)

// hugeTokens is the count a hostile node reported in issue 29: 2^62.
const hugeTokens = int64(1) << 62

// usageEngine streams chunks content chunks, then a usage chunk that says
// prompt and completion tokens, whatever was sent: a broken or hostile
// engine (or a node that speaks for one).
func usageEngine(chunks int, prompt, completion int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range chunks {
			fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"content":"ab"}}]}`+"\n\n")
		}
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":0}}`+"\n\n", prompt, completion)
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
}

// meteredGateway starts one more gateway replica on s whose metrics join
// a registry the test reads, and makes it the one s.do talks to.
func (s *stack) meteredGateway() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	s.url = s.gateway(func(c *gateway.Config) { c.Metrics = gateway.NewMetrics(reg) })
	return reg
}

// corrections returns how many settles of llama-8b the registry's gateway
// counted as corrected for reason.
func corrections(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"model": "llama-8b", "reason": reason}
	for _, f := range families {
		if f.GetName() != "llmplat_gateway_usage_corrected_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// usageReport reads the key's team's /v1/usage.
func (s *stack) usageReport(key string) (int, gateway.UsageReport) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url+"/v1/usage", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep gateway.UsageReport
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
			s.t.Fatal(err)
		}
	}
	return resp.StatusCode, rep
}

// TestHugeReportedUsageIsBounded: an engine that reports 2^62 tokens for
// an answer of five chunks is billed no more than the request's
// reservation allows — output at most its max_tokens, a cost within the
// hold — and its team's /v1/usage keeps answering 200 with the billed
// totals after two such requests (it answered 503 for good: the sum
// overflowed), streamed or not.
func TestHugeReportedUsageIsBounded(t *testing.T) {
	const maxTokens = 100
	s := newStack(t, stackOpts{engine: usageEngine(5, hugeTokens, hugeTokens)})
	m := s.meteredGateway()
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team, TokensPerDay: 1_000_000})
	var prompt, completion, cost int64
	for _, stream := range []bool{true, false} {
		resp, body := s.do(key, chatBody("llama-8b", stream, maxTokens))
		if resp.StatusCode != 200 {
			t.Fatalf("stream %v: status %d: %s", stream, resp.StatusCode, body)
		}
		r := s.waitRow(resp.Header.Get("X-Request-Id"))
		if r.status != "settled" || r.completion > maxTokens || r.completion < 5 || r.prompt < 0 ||
			r.cost > r.reserved || ledger.Cost(r.prompt, r.completion, promptPrice, completionPrice) > r.reserved {
			t.Errorf("stream %v: row %+v; want settled within the reservation: at most %d output tokens, tokens costing at most the hold",
				stream, r, maxTokens)
		}
		prompt, completion, cost = prompt+r.prompt, completion+r.completion, cost+r.cost
	}
	s.settled()
	code, rep := s.usageReport(key)
	if code != http.StatusOK {
		t.Fatalf("/v1/usage answered %d after two huge reports, want 200", code)
	}
	if len(rep.Data) != 1 {
		t.Fatalf("usage %+v, want one model", rep.Data)
	}
	if d := rep.Data[0]; d.Requests != 2 || d.PromptTokens != prompt || d.CompletionTokens != completion ||
		d.TotalTokens != prompt+completion || d.CostMicrocredits != cost {
		t.Errorf("usage %+v, want 2 requests of %d + %d tokens costing %d", d, prompt, completion, cost)
	}
	if got := corrections(t, m, "over_reserved"); got != 2 {
		t.Errorf("over_reserved corrections counted %v, want 2", got)
	}
}

// TestNegativeReportedUsageSettles: an engine's negative usage neither
// leaves the row reserved (it was refused at every settle and sweep,
// holding the team's credit for good) nor bills less than was relayed:
// the row settles at the chunks relayed, and the prompt — whose text has
// words, so no engine counts it as nothing — at the reserved estimate.
func TestNegativeReportedUsageSettles(t *testing.T) {
	const chunks = 5
	s := newStack(t, stackOpts{engine: usageEngine(chunks, -5, -hugeTokens)})
	m := s.meteredGateway()
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	for _, stream := range []bool{true, false} {
		req := chatBody("llama-8b", stream, 100)
		resp, body := s.do(key, req)
		if resp.StatusCode != 200 {
			t.Fatalf("stream %v: status %d: %s", stream, resp.StatusCode, body)
		}
		r := s.waitRow(resp.Header.Get("X-Request-Id"))
		if est := gateway.PromptEstimate(t, req); r.status != "settled" || r.completion != chunks || r.prompt != est || r.cost <= 0 {
			t.Errorf("stream %v: row %+v; want settled at the %d chunks relayed and the prompt's estimate %d, at a cost", stream, r, chunks, est)
		}
	}
	s.settled()
	if b, err := s.led.Balance(t.Context(), team); err != nil || b.Reserved != 0 {
		t.Errorf("balance %+v (%v), want nothing held", b, err)
	}
	if neg, under, prompt := corrections(t, m, "negative"), corrections(t, m, "under_reported"), corrections(t, m, "implausible_prompt"); neg != 2 || under != 2 || prompt != 2 {
		t.Errorf("corrections counted: negative %v, under_reported %v, implausible_prompt %v; want 2 of each", neg, under, prompt)
	}
}

// TestUnderReportedUsageBillsRelayed: 50 chunks relayed and an engine
// usage of 1 completion token bill the 50 (1 was billed), and each such
// settle is counted once in llmplat_gateway_usage_corrected_total.
func TestUnderReportedUsageBillsRelayed(t *testing.T) {
	const chunks = 50
	s := newStack(t, stackOpts{engine: usageEngine(chunks, 20, 1)})
	m := s.meteredGateway()
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team, TokensPerDay: 1_000_000})
	for i, stream := range []bool{true, false} {
		resp, body := s.do(key, chatBody("llama-8b", stream, 100))
		if resp.StatusCode != 200 {
			t.Fatalf("stream %v: status %d: %s", stream, resp.StatusCode, body)
		}
		r := s.waitRow(resp.Header.Get("X-Request-Id"))
		if want := ledger.Cost(20, chunks, promptPrice, completionPrice); r.status != "settled" || r.from != "exact" ||
			r.prompt != 20 || r.completion != chunks || r.cost != want {
			t.Errorf("stream %v: row %+v; want settled at 20 + %d tokens costing %d", stream, r, chunks, want)
		}
		s.settled()
		if got := corrections(t, m, "under_reported"); got != float64(i+1) {
			t.Errorf("stream %v: under_reported corrections counted %v, want %d", stream, got, i+1)
		}
	}
}
