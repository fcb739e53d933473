package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/gateway"
	oa "github.com/llmplat/llmplat/runtime/openai"
)

// TestOfficialClientSettlesExactly: the official Go client streams through
// the gateway; the ledger row settles to the engine's exact counts, the
// balance drops by exactly the cost, the engine counted the same tokens,
// and /v1/usage reports them.
func TestOfficialClientSettlesExactly(t *testing.T) {
	s := newStack(t, stackOpts{})
	teamID := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: teamID, Name: "k"})

	var httpResp *http.Response
	client := openai.NewClient(option.WithBaseURL(s.url+"/v1"), option.WithAPIKey(key))
	ctx := context.Background()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "llama-8b",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
		MaxTokens:     openai.Int(40),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, option.WithResponseInto(&httpResp))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if acc.Usage.CompletionTokens == 0 || acc.Choices[0].Message.Content == "" {
		t.Fatalf("no answer: %+v", acc)
	}
	for _, h := range []string{"X-Request-Id"} {
		if httpResp.Header.Get(h) == "" {
			t.Errorf("missing header %s", h)
		}
	}
	r := s.waitRow(httpResp.Header.Get("X-Request-Id"))
	if r.status != "settled" || r.from != "exact" || r.prompt != acc.Usage.PromptTokens || r.completion != acc.Usage.CompletionTokens {
		t.Errorf("ledger row = %+v, want settled exact %d/%d", r, acc.Usage.PromptTokens, acc.Usage.CompletionTokens)
	}
	wantCost := (r.prompt*promptPrice + r.completion*completionPrice + 999_999) / 1_000_000
	if r.cost != wantCost {
		t.Errorf("cost = %d, want %d", r.cost, wantCost)
	}
	bal, err := s.led.Balance(ctx, teamID)
	if err != nil {
		t.Fatal(err)
	}
	if bal.Balance != 10*credit-r.cost || bal.Reserved != 0 {
		t.Errorf("balance = %+v, want %d with nothing reserved", bal, 10*credit-r.cost)
	}
	stats := s.sims["llama-8b"].Stats()
	if stats.GenerationTokens != acc.Usage.CompletionTokens {
		t.Errorf("engine counted %d tokens, ledger settled %d", stats.GenerationTokens, acc.Usage.CompletionTokens)
	}

	req, _ := http.NewRequest(http.MethodGet, s.url+"/v1/usage", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep gateway.UsageReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Data) != 1 || rep.Data[0].CompletionTokens != acc.Usage.CompletionTokens || rep.Data[0].PromptTokens != acc.Usage.PromptTokens || rep.Data[0].CostMicrocredits != r.cost {
		t.Errorf("usage = %+v, want one row of %d/%d costing %d", rep.Data, acc.Usage.PromptTokens, acc.Usage.CompletionTokens, r.cost)
	}

	// Non-streamed through the same path.
	comp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "llama-8b", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Again")}, MaxTokens: openai.Int(10),
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Choices[0].Message.Content == "" || comp.Usage.CompletionTokens == 0 {
		t.Errorf("non-streamed answer empty: %+v", comp)
	}
}

func TestRefusals(t *testing.T) {
	s := newStack(t, stackOpts{})
	rich := s.team("rich", 10*credit)
	poor := s.team("poor", 0)
	key := s.key(adminwire.CreateKeyRequest{TeamID: rich, ModelAllowlist: []string{"llama-8b"}})
	poorKey := s.key(adminwire.CreateKeyRequest{TeamID: poor})
	rpmKey := s.key(adminwire.CreateKeyRequest{TeamID: rich, RPM: 1})
	tpdKey := s.key(adminwire.CreateKeyRequest{TeamID: rich, TokensPerDay: 5})
	past := time.Now().Add(-time.Hour)
	expired := s.key(adminwire.CreateKeyRequest{TeamID: rich, ExpiresAt: &past})

	// Use up the rpm and tokens-per-day budgets first.
	// Each answer tells the limits it passed.
	resp, body := s.do(rpmKey, chatBody("llama-8b", false, 5))
	if resp.StatusCode != 200 {
		t.Fatalf("first rpm request: %d %s", resp.StatusCode, body)
	}
	if l, r := resp.Header.Get("X-Ratelimit-Limit-Requests"), resp.Header.Get("X-Ratelimit-Remaining-Requests"); l != "1" || r != "0" {
		t.Errorf("rpm headers: limit %q remaining %q, want 1 and 0", l, r)
	}
	resp, body = s.do(tpdKey, chatBody("llama-8b", false, 5))
	if resp.StatusCode != 200 {
		t.Fatalf("first tokens request: %d %s", resp.StatusCode, body)
	}
	if l, r := resp.Header.Get("X-Ratelimit-Limit-Tokens"), resp.Header.Get("X-Ratelimit-Remaining-Tokens"); l != "5" || r != "5" {
		t.Errorf("tokens headers: limit %q remaining %q, want 5 and 5", l, r)
	}
	if h := resp.Header.Get("X-Ratelimit-Limit-Requests"); h != "" {
		t.Errorf("a key without rpm got X-Ratelimit-Limit-Requests %q", h)
	}
	// The day's tokens are counted when the request settles, after the
	// answer.
	s.settled()

	tests := []struct {
		errorCase
		key, body string
	}{
		{errorCase{"no key", 401, oa.TypeAuthentication, "missing_api_key", false}, "", chatBody("llama-8b", true, 5)},
		{errorCase{"bad key", 401, oa.TypeAuthentication, "invalid_api_key", false}, "llp_" + strings.Repeat("x", 43), chatBody("llama-8b", true, 5)},
		{errorCase{"expired key", 401, oa.TypeAuthentication, "expired_api_key", false}, expired, chatBody("llama-8b", true, 5)},
		{errorCase{"bad json", 400, oa.TypeInvalidRequest, "invalid_json", false}, key, `{"model":`},
		{errorCase{"no messages", 400, oa.TypeInvalidRequest, "invalid_value", false}, key, `{"model":"llama-8b","messages":[]}`},
		{errorCase{"unknown model", 404, oa.TypeNotFound, "model_not_found", false}, key, chatBody("gpt-9", true, 5)},
		{errorCase{"model not allowed", 403, oa.TypePermission, "model_not_allowed", false}, key, chatBody("qwen-32b", true, 5)},
		{errorCase{"no balance", 402, oa.TypeInsufficient, "insufficient_balance", false}, poorKey, chatBody("llama-8b", true, 5)},
		{errorCase{"rpm", 429, oa.TypeRateLimit, "rate_limit_exceeded", true}, rpmKey, chatBody("llama-8b", true, 5)},
		{errorCase{"tokens per day", 429, oa.TypeRateLimit, "tokens_per_day_exceeded", true}, tpdKey, chatBody("llama-8b", true, 5)},
		{errorCase{"metadata url", 400, oa.TypeInvalidRequest, "url_not_allowed", false}, key,
			`{"model":"llama-8b","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/latest/meta-data/"}}]}]}`},
		{errorCase{"loopback url", 400, oa.TypeInvalidRequest, "url_not_allowed", false}, key,
			`{"model":"llama-8b","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","description":"http://127.0.0.1/"}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			resp, body := s.do(tt.key, tt.body)
			checkError(t, resp, body, tt.errorCase)
		})
	}
	if strings.Contains(s.logs.String(), "secret prompt") || strings.Contains(s.logs.String(), "llamas") {
		t.Error("a prompt reached the logs")
	}
}

// TestStreamLimitAndQueueTimeout: a key at its stream limit gets 429 with
// Retry-After; a model whose engines are full queues, then answers 503 with
// Retry-After at the queue limit, and the queued request's reservation is
// cancelled.
func TestStreamLimitAndQueueTimeout(t *testing.T) {
	s := newStack(t, stackOpts{maxInFlight: 1, queueLimit: 300 * time.Millisecond, faults: enginesim.Faults{Hang: true}})
	team := s.team("t", 10*credit)
	one := s.key(adminwire.CreateKeyRequest{TeamID: team, MaxStreams: 1})
	other := s.key(adminwire.CreateKeyRequest{TeamID: team})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held, err := s.post(ctx, s.url, one, chatBody("llama-8b", true, 5))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Body.Close()

	resp, body := s.do(one, chatBody("llama-8b", true, 5))
	checkError(t, resp, body, errorCase{"streams", 429, oa.TypeRateLimit, "concurrency_limit_exceeded", true})

	start := time.Now()
	resp, body = s.do(other, chatBody("llama-8b", true, 5))
	checkError(t, resp, body, errorCase{"queue", 503, oa.TypeUnavailable, "no_capacity", true})
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("answered after %v, before the queue limit", waited)
	}
	if r := s.waitRow(resp.Header.Get("X-Request-Id")); r.status != "cancelled" {
		t.Errorf("queued request's row = %+v, want cancelled", r)
	}
}

// TestMaxStreamsUnderAttack: 500 concurrent streams on one key with
// max_streams 10 never have more than 10 active, the rest get 429, and the
// slot set is empty afterwards.
func TestMaxStreamsUnderAttack(t *testing.T) {
	s := newStack(t, stackOpts{timeScale: 20, redisTimeout: time.Minute})
	team := s.team("t", 1000*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team, MaxStreams: 10})
	keyID := int64(1)
	rdb := s.redis.Client()

	var peak, engPeak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := s.activeStreams(rdb, keyID); n > peak.Load() {
				peak.Store(n)
			}
			if n := int64(s.sims["llama-8b"].Stats().Running); n > engPeak.Load() {
				engPeak.Store(n)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var ok, limited, other atomic.Int64
	var (
		otherMu  sync.Mutex
		otherWhy []string
	)
	noteOther := func(why string) {
		other.Add(1)
		otherMu.Lock()
		otherWhy = append(otherWhy, why)
		otherMu.Unlock()
	}
	var wg sync.WaitGroup
	for range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.post(context.Background(), s.url, key, chatBody("llama-8b", true, 20))
			if err != nil {
				noteOther(err.Error())
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case 200:
				ok.Add(1)
			case 429:
				limited.Add(1)
			default:
				noteOther(fmt.Sprintf("%d %s", resp.StatusCode, b))
			}
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	t.Logf("200: %d, 429: %d, other: %d, peak slots %d, peak engine sequences %d", ok.Load(), limited.Load(), other.Load(), peak.Load(), engPeak.Load())
	if peak.Load() > 10 || engPeak.Load() > 10 {
		t.Errorf("peak active = %d slots, %d engine sequences; want at most 10", peak.Load(), engPeak.Load())
	}
	if ok.Load() < 10 || ok.Load()+limited.Load() != 500 || other.Load() != 0 {
		t.Errorf("200=%d 429=%d other=%d; want every request answered 200 or 429, at least 10 served; the others: %q",
			ok.Load(), limited.Load(), other.Load(), otherWhy)
	}
	if n := s.waitSlotsFree(rdb, keyID); n != 0 {
		t.Errorf("%d stream slots still held 30 s after every request ended", n)
	}
}

// TestRPMAcrossTwoGateways: the per-minute limit holds across two gateway
// replicas sharing Redis.
func TestRPMAcrossTwoGateways(t *testing.T) {
	s := newStack(t, stackOpts{})
	second := s.gateway()
	team := s.team("t", 100*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team, RPM: 5})
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := s.url
			if i%2 == 1 {
				url = second
			}
			resp, err := s.post(context.Background(), url, key, chatBody("llama-8b", false, 3))
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case 200:
				ok.Add(1)
			case 429:
				limited.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 5 || limited.Load() != 15 {
		t.Errorf("200=%d 429=%d across two gateways, want exactly 5 and 15", ok.Load(), limited.Load())
	}
}

// TestClientDisconnectSettlesPartial: a client that leaves mid-stream
// aborts the engine's sequence, the ledger settles the tokens produced so
// far, and the stream slot is free again.
func TestClientDisconnectSettlesPartial(t *testing.T) {
	s := newStack(t, stackOpts{timeScale: 1})
	team := s.team("t", 100*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team, MaxStreams: 2})
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := s.post(ctx, s.url, key, chatBody("llama-8b", true, 2000))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("X-Request-Id")
	r := oa.NewSSEReader(resp.Body)
	for range 5 {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	resp.Body.Close()
	row := s.waitRow(id)
	if row.status != "settled" || row.from != "partial" || row.completion < 4 || row.completion >= 2000 {
		t.Errorf("row = %+v, want settled partial with the few tokens produced", row)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.sims["llama-8b"].Stats().Running != 0 || s.activeStreams(s.redis.Client(), 1) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("engine still runs %d sequences or the slot is held after the client left", s.sims["llama-8b"].Stats().Running)
		}
		time.Sleep(10 * time.Millisecond)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestHungEngineTimesOutTheFirstToken: an engine that takes the request
// and never streams a token is given up on after the first-token timeout.
// The engine answered its headers, so a streamed request has its 200 and
// gets an error event that names the timeout; a non-streamed one gets a
// 504. Nothing was generated, so nothing is charged, and the stream slot
// is given back.
func TestHungEngineTimesOutTheFirstToken(t *testing.T) {
	s := newStack(t, stackOpts{timeScale: 20, firstTokenTimeout: 300 * time.Millisecond,
		faults: enginesim.Faults{Hang: true}})
	team := s.team("t", 100*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team, MaxStreams: 1})
	for _, streamed := range []bool{true, false} {
		resp, err := s.post(context.Background(), s.url, key, fmt.Sprintf(
			`{"model":"llama-8b","stream":%t,"max_tokens":50,"messages":[{"role":"user","content":"hello"}]}`, streamed))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := http.StatusGatewayTimeout
		if streamed {
			want = http.StatusOK
		}
		if resp.StatusCode != want || !strings.Contains(string(body), `"code":"first_token_timeout"`) {
			t.Fatalf("stream %t: status %d %s, want %d naming first_token_timeout", streamed, resp.StatusCode, body, want)
		}
		if row := s.waitRow(resp.Header.Get("X-Request-Id")); row.cost != 0 || row.completion != 0 {
			t.Errorf("stream %t: row = %+v, want nothing charged", streamed, row)
		}
		// The slot came back (the test's one key has id 1).
		for deadline := time.Now().Add(10 * time.Second); s.activeStreams(s.redis.Client(), 1) != 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("stream %t: the stream slot was not given back", streamed)
			}
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestMaxRequestDurationEndsTheStream: a stream that runs past the
// request's whole-duration limit, though never silent for long, is cut
// with an error event, and the ledger settles what was relayed.
func TestMaxRequestDurationEndsTheStream(t *testing.T) {
	s := newStack(t, stackOpts{timeScale: 1, maxRequestDuration: 500 * time.Millisecond, streamIdleTimeout: time.Hour})
	team := s.team("t", 100*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	// In real time the engine streams about 40 tokens a second: 2,000
	// tokens take far longer than the limit.
	resp, err := s.post(context.Background(), s.url, key,
		`{"model":"llama-8b","stream":true,"max_tokens":2000,"messages":[{"role":"user","content":"a long story"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := oa.NewSSEReader(resp.Body)
	var content, errEvents int
	var lastErr string
	for done := false; !done; {
		data, err := r.Next()
		switch {
		case err != nil:
			t.Fatalf("stream ended with %v, want an error event and [DONE]", err)
		case oa.IsDone(data):
			done = true
		case oa.StreamError(data) != nil:
			errEvents++
			lastErr = string(oa.StreamError(data).Code)
		default:
			content++
		}
	}
	row := s.waitRow(resp.Header.Get("X-Request-Id"))
	if errEvents != 1 || content == 0 || row.status != "settled" || row.from != "partial" || lastErr != `"request_timeout"` ||
		row.completion == 0 || row.completion >= 2000 {
		t.Errorf("%d content chunks, %d error events (last %q), row %+v; want some content, one request_timeout event and a partial settle",
			content, errEvents, lastErr, row)
	}
	if strings.Contains(s.logs.String(), "engine went silent mid-stream") {
		t.Error("a stream cut by its duration limit was logged as a silent engine")
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestStalledEngineEndsTheStream: an engine that goes silent mid-stream
// (its connection open, as a wedged engine's is) ends the client's stream
// after the idle timeout with an error event, and the ledger settles the
// tokens relayed.
func TestStalledEngineEndsTheStream(t *testing.T) {
	s := newStack(t, stackOpts{timeScale: 20, streamIdleTimeout: 300 * time.Millisecond,
		faults: enginesim.Faults{StallAfterTokens: 5}})
	team := s.team("t", 100*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	start := time.Now()
	// The client asks for the running usage, so it sees the count the
	// engine had reached when it stalled.
	body := `{"model":"llama-8b","stream":true,"max_tokens":200,"stream_options":{"include_usage":true,"continuous_usage_stats":true},"messages":[{"role":"user","content":"a secret prompt about llamas"}]}`
	resp, err := s.post(context.Background(), s.url, key, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := oa.NewSSEReader(resp.Body)
	var content, errEvents int
	var last oa.Usage
	done := false
	for !done {
		data, err := r.Next()
		switch {
		case err != nil:
			t.Fatalf("stream ended with %v, want an error event and [DONE]", err)
		case oa.IsDone(data):
			done = true
		case oa.StreamError(data) != nil:
			errEvents++
		case strings.Contains(string(data), `"content":"`) && !strings.Contains(string(data), `"content":""`):
			content++
			var c oa.ChatCompletionChunk
			if err := json.Unmarshal(data, &c); err != nil || c.Usage == nil {
				t.Fatalf("content chunk without the running usage the client asked for: %s", data)
			}
			last = *c.Usage
		}
	}
	// Without the idle timer the stream would hang for the request's 9
	// minutes; a minute is far beyond any machine's delay.
	if took := time.Since(start); took > time.Minute {
		t.Errorf("the stalled stream ended after %v", took)
	}
	if errEvents != 1 || content == 0 || content > 5 {
		t.Errorf("%d content chunks and %d error events, want 1–5 and 1", content, errEvents)
	}
	// The engine's running usage makes the partial settle exact: the
	// tokens it streamed before it stalled (at least 5; a chunk may carry
	// several) and its own prompt count rather than the gateway's estimate.
	row := s.waitRow(resp.Header.Get("X-Request-Id"))
	if st := s.sims["llama-8b"].Stats(); row.status != "settled" || row.from != "partial" ||
		row.completion != last.CompletionTokens || last.CompletionTokens < 5 ||
		row.prompt != st.PromptTokens || row.prompt != last.PromptTokens {
		t.Errorf("row = %+v, want settled partial with the engine's last running usage %+v (engine prompt %d, %d chunks relayed)",
			row, last, st.PromptTokens, content)
	}
	if !strings.Contains(s.logs.String(), "engine went silent mid-stream") {
		t.Error("the stall was not logged")
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestTenantIsolation: team B's key can neither read team A's usage nor
// use a model only A may use.
func TestTenantIsolation(t *testing.T) {
	s := newStack(t, stackOpts{})
	a := s.team("a", 10*credit)
	b := s.team("b", 10*credit)
	keyA := s.key(adminwire.CreateKeyRequest{TeamID: a, ModelAllowlist: []string{"llama-8b", "qwen-32b"}})
	keyB := s.key(adminwire.CreateKeyRequest{TeamID: b, ModelAllowlist: []string{"llama-8b"}})
	resp, body := s.do(keyA, chatBody("qwen-32b", false, 5))
	if resp.StatusCode != 200 {
		t.Fatalf("team A: %d %s", resp.StatusCode, body)
	}
	// The settle runs after the answer: A's usage exists once it has.
	s.settled()
	resp, body = s.do(keyB, chatBody("qwen-32b", false, 5))
	checkError(t, resp, body, errorCase{"b uses a's model", 403, oa.TypePermission, "model_not_allowed", false})

	for _, tc := range []struct {
		key   string
		wantN int
	}{{keyA, 1}, {keyB, 0}} {
		req, _ := http.NewRequest(http.MethodGet, s.url+"/v1/usage?team_id="+itoa(a), nil)
		req.Header.Set("Authorization", "Bearer "+tc.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var rep gateway.UsageReport
		_ = json.NewDecoder(resp.Body).Decode(&rep)
		resp.Body.Close()
		if len(rep.Data) != tc.wantN {
			t.Errorf("usage rows = %d (%+v), want %d: the team comes from the key, never from the request", len(rep.Data), rep.Data, tc.wantN)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, s.url+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+keyB)
	mresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list oa.ModelList
	_ = json.NewDecoder(mresp.Body).Decode(&list)
	mresp.Body.Close()
	if len(list.Data) != 1 || list.Data[0].ID != "llama-8b" {
		t.Errorf("team B sees models %+v, want only llama-8b", list.Data)
	}
}
