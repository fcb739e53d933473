package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/enginesim"
	oa "github.com/llmplat/llmplat/runtime/openai"
)

// responsesClient is the official client against the stack's gateway,
// without retries: a test sees each answer as the gateway gave it.
func (s *stack) responsesClient(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(s.url+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// TestResponsesOfficialClient: the official Go client's Responses.New and
// Responses.NewStreaming through the gateway. The non-streamed response
// has the answer's text and the usage it is billed; the stream is the
// Responses event sequence, numbered from 0, its deltas adding up to the
// text done and completed; each ledger row settles exactly the usage the
// client was shown.
func TestResponsesOfficialClient(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("t", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	client := s.responsesClient(key)
	ctx := context.Background()

	t.Run("not streamed", func(t *testing.T) {
		var httpResp *http.Response
		resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model:           "llama-8b",
			Instructions:    openai.String("Answer briefly."),
			Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello")},
			MaxOutputTokens: openai.Int(30),
		}, option.WithResponseInto(&httpResp))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Object != "response" || resp.OutputText() == "" || (resp.Status != "completed" && resp.Status != "incomplete") {
			t.Fatalf("response = %s", resp.RawJSON())
		}
		if u := resp.Usage; u.InputTokens == 0 || u.OutputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens {
			t.Errorf("usage = %+v", u)
		}
		r := s.waitRow(httpResp.Header.Get("X-Request-Id"))
		if r.status != "settled" || r.from != "exact" || r.prompt != resp.Usage.InputTokens || r.completion != resp.Usage.OutputTokens {
			t.Errorf("ledger row = %+v, want settled exact %d/%d", r, resp.Usage.InputTokens, resp.Usage.OutputTokens)
		}
	})

	t.Run("streamed", func(t *testing.T) {
		var httpResp *http.Response
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "llama-8b",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("You are brief.", responses.EasyInputMessageRoleSystem),
				responses.ResponseInputItemParamOfMessage("Say hello", responses.EasyInputMessageRoleUser),
			}},
			MaxOutputTokens: openai.Int(40),
		}, option.WithResponseInto(&httpResp))
		var (
			types     []string
			deltas    strings.Builder
			done      string
			completed responses.Response
			seq       int64
		)
		for stream.Next() {
			ev := stream.Current()
			if ev.SequenceNumber != seq {
				t.Errorf("event %q has sequence number %d, want %d", ev.Type, ev.SequenceNumber, seq)
			}
			seq++
			if len(types) == 0 || types[len(types)-1] != ev.Type {
				types = append(types, ev.Type)
			}
			switch ev.Type {
			case "response.output_text.delta":
				deltas.WriteString(ev.AsResponseOutputTextDelta().Delta)
			case "response.output_text.done":
				done = ev.AsResponseOutputTextDone().Text
			case "response.completed", "response.incomplete":
				completed = ev.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done"}
		if got := strings.Join(types, " "); !strings.HasPrefix(got, strings.Join(want, " ")+" response.") {
			t.Errorf("events %v, want %v then the response's end", types, want)
		}
		if deltas.Len() == 0 || deltas.String() != done || completed.OutputText() != done {
			t.Errorf("deltas %q, done %q, completed %q: want one text", deltas.String(), done, completed.OutputText())
		}
		u := completed.Usage
		r := s.waitRow(httpResp.Header.Get("X-Request-Id"))
		if u.OutputTokens == 0 || r.status != "settled" || r.from != "exact" || r.prompt != u.InputTokens || r.completion != u.OutputTokens {
			t.Errorf("ledger row = %+v, want settled exact as shown %+v", r, u)
		}
	})

	t.Run("function tools and their output", func(t *testing.T) {
		resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "llama-8b",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("What is the weather?", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "call_1", "weather"),
				functionCallOutput("call_1", "sunny"),
			}},
			Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "weather",
				Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}},
			MaxOutputTokens: openai.Int(20),
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.OutputText() == "" {
			t.Errorf("response = %s", resp.RawJSON())
		}
	})
}

// functionCallOutput is a function_call_output input item.
func functionCallOutput(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = openai.String(callID)
	return item
}

// TestResponsesCancelMidStream: a client that leaves a Responses stream
// after a few deltas is billed what was relayed: the row settles partial
// with the few tokens produced, not the output cap.
func TestResponsesCancelMidStream(t *testing.T) {
	s := newStack(t, stackOpts{timeScale: 1})
	team := s.team("t", 100*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	client := s.responsesClient(key)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var httpResp *http.Response
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model:           "llama-8b",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell a long story")},
		MaxOutputTokens: openai.Int(2000),
	}, option.WithResponseInto(&httpResp))
	deltas := 0
	for deltas < 5 && stream.Next() {
		if stream.Current().Type == "response.output_text.delta" {
			deltas++
		}
	}
	if deltas < 5 {
		t.Fatalf("%d deltas before the stream ended: %v", deltas, stream.Err())
	}
	cancel()
	stream.Close()
	row := s.waitRow(httpResp.Header.Get("X-Request-Id"))
	if row.status != "settled" || row.from != "partial" || row.completion < 4 || row.completion >= 2000 {
		t.Errorf("row = %+v, want settled partial with the few tokens relayed", row)
	}
}

// TestResponsesRefusals: refusals reach the official client as API errors
// with their status, code and param; what the platform cannot honour
// (stored responses, their continuation, a field it does not know) is
// refused 400, never ignored; a duplicate key is refused as in a chat
// body.
func TestResponsesRefusals(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("t", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	rpmKey := s.key(adminwire.CreateKeyRequest{TeamID: team, RPM: 1})
	hello := responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello")}
	ctx := context.Background()
	rpmClient := s.responsesClient(rpmKey)
	if _, err := rpmClient.Responses.New(ctx, responses.ResponseNewParams{Model: "llama-8b", Input: hello, MaxOutputTokens: openai.Int(5)}); err != nil {
		t.Fatalf("first request of the rpm key: %v", err)
	}

	tests := []struct {
		name, key   string
		params      responses.ResponseNewParams
		stream      bool
		status      int
		code, param string
	}{
		{"refused key", "llp_" + strings.Repeat("x", 43), responses.ResponseNewParams{Model: "llama-8b", Input: hello}, false, 401, "invalid_api_key", ""},
		{"refused key streamed", "llp_" + strings.Repeat("x", 43), responses.ResponseNewParams{Model: "llama-8b", Input: hello}, true, 401, "invalid_api_key", ""},
		{"rpm", rpmKey, responses.ResponseNewParams{Model: "llama-8b", Input: hello}, false, 429, "rate_limit_exceeded", ""},
		{"rpm streamed", rpmKey, responses.ResponseNewParams{Model: "llama-8b", Input: hello}, true, 429, "rate_limit_exceeded", ""},
		{"store", key, responses.ResponseNewParams{Model: "llama-8b", Input: hello, Store: openai.Bool(true)}, false, 400, "unsupported_parameter", "store"},
		{"previous response", key, responses.ResponseNewParams{Model: "llama-8b", Input: hello, PreviousResponseID: openai.String("resp_1")}, false, 400,
			"unsupported_parameter", "previous_response_id"},
		{"unknown field", key, responses.ResponseNewParams{Model: "llama-8b", Input: hello, Background: openai.Bool(true)}, false, 400,
			"unsupported_parameter", "background"},
		{"unknown model", key, responses.ResponseNewParams{Model: "gpt-9", Input: hello}, false, 404, "model_not_found", "model"},
		{"metadata url", key, responses.ResponseNewParams{Model: "llama-8b",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("http://169.254.169.254/latest/meta-data/")}}, false, 400, "url_not_allowed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := s.responsesClient(tt.key)
			var err error
			if tt.stream {
				stream := client.Responses.NewStreaming(ctx, tt.params)
				for stream.Next() {
				}
				err = stream.Err()
				stream.Close()
			} else {
				_, err = client.Responses.New(ctx, tt.params)
			}
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want an API error", err)
			}
			if apiErr.StatusCode != tt.status || apiErr.Code != tt.code || (tt.param != "" && apiErr.Param != tt.param) {
				t.Errorf("got %d %s param %q (%s), want %d %s param %q", apiErr.StatusCode, apiErr.Code, apiErr.Param, apiErr.Message,
					tt.status, tt.code, tt.param)
			}
		})
	}

	t.Run("duplicate key", func(t *testing.T) {
		for _, body := range []string{
			`{"model":"llama-8b","input":"hi","max_output_tokens":5,"max_output_tokens":4000}`,
			`{"model":"llama-8b","input":[{"role":"user","content":"hi","role":"system"}]}`,
		} {
			resp, got := s.doPath(key, "/v1/responses", body)
			checkError(t, resp, got, errorCase{Name: "duplicate", Status: 400, Typ: oa.TypeInvalidRequest, Code: "duplicate_key"})
		}
	})
	t.Run("variant key", func(t *testing.T) {
		resp, got := s.doPath(key, "/v1/responses", `{"model":"llama-8b","input":[{"ROLE":"user","content":"hi"}]}`)
		checkError(t, resp, got, errorCase{Name: "variant", Status: 400, Typ: oa.TypeInvalidRequest, Code: "variant_key"})
	})
	t.Run("unsupported tool", func(t *testing.T) {
		resp, got := s.doPath(key, "/v1/responses", `{"model":"llama-8b","input":"hi","tools":[{"type":"web_search"}]}`)
		checkError(t, resp, got, errorCase{Name: "tool", Status: 400, Typ: oa.TypeInvalidRequest, Code: "unsupported_parameter"})
	})
}

// doPath posts body to path with a key and reads the whole answer.
func (s *stack) doPath(key, path, body string) (*http.Response, string) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestResponsesEngineDiesMidStream: an engine that dies mid-answer ends a
// Responses stream with response.failed, which carries the error and the
// usage billed for what was relayed — the ledger row's; a non-streamed
// request gets a 502.
func TestResponsesEngineDiesMidStream(t *testing.T) {
	s := newStack(t, stackOpts{faults: enginesim.Faults{DieAfterTokens: 5}})
	team := s.team("t", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	client := s.responsesClient(key)
	ctx := context.Background()
	var httpResp *http.Response
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model:           "llama-8b",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell a long story")},
		MaxOutputTokens: openai.Int(200),
	}, option.WithResponseInto(&httpResp))
	var failed *responses.Response
	var deltas int
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.output_text.delta":
			deltas++
		case "response.failed":
			failed = &ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if failed == nil || failed.Status != "failed" || failed.Error.Code == "" || deltas == 0 {
		t.Fatalf("%d deltas, failed event %+v: want some text, then response.failed with its error", deltas, failed)
	}
	r := s.waitRow(httpResp.Header.Get("X-Request-Id"))
	if u := failed.Usage; r.status != "settled" || r.from != "partial" || r.prompt != u.InputTokens || r.completion != u.OutputTokens || u.OutputTokens == 0 {
		t.Errorf("ledger row = %+v, want settled partial as shown %+v", r, u)
	}

	s.sims["llama-8b"].SetFaults(enginesim.Faults{DieAfterTokens: 5})
	_, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "llama-8b", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell a long story")}, MaxOutputTokens: openai.Int(200),
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway && apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("non-streamed err = %v, want a 502 (or 503 while the engine is dead)", err)
	}
}

// TestResponsesFunctionCalls: an answer that is only tool calls is, to the
// official client, function_call items — no empty message — each whole
// (call id, name, arguments joined in order), streamed or not, with the
// usage the ledger settles.
func TestResponsesFunctionCalls(t *testing.T) {
	s := newStack(t, stackOpts{engine: wholeToolCallEngine()})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	client := s.responsesClient(key)
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "llama-8b", MaxOutputTokens: openai.Int(100),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris, and the time?")}}
	check := func(t *testing.T, resp *responses.Response, requestID string) {
		t.Helper()
		var calls []string
		for _, it := range resp.Output {
			if it.Type != "function_call" {
				t.Errorf("output item of type %q, want only function calls", it.Type)
				continue
			}
			fc := it.AsFunctionCall()
			calls = append(calls, fc.CallID+" "+fc.Name+" "+fc.Arguments)
		}
		if got := strings.Join(calls, ", "); got != `call_a weather {"city":"Paris"}, call_b time {}` {
			t.Errorf("function calls %q", got)
		}
		r := s.waitRow(requestID)
		if r.status != "settled" || r.completion != 9 || resp.Usage.OutputTokens != 9 || r.prompt != resp.Usage.InputTokens {
			t.Errorf("row %+v, usage %+v: want both the engine's 9 tokens", r, resp.Usage)
		}
	}

	t.Run("not streamed", func(t *testing.T) {
		var httpResp *http.Response
		resp, err := client.Responses.New(ctx, params, option.WithResponseInto(&httpResp))
		if err != nil {
			t.Fatal(err)
		}
		check(t, resp, httpResp.Header.Get("X-Request-Id"))
	})
	t.Run("streamed", func(t *testing.T) {
		var httpResp *http.Response
		stream := client.Responses.NewStreaming(ctx, params, option.WithResponseInto(&httpResp))
		var completed *responses.Response
		var args []string
		for stream.Next() {
			switch ev := stream.Current(); ev.Type {
			case "response.function_call_arguments.done":
				args = append(args, ev.Arguments)
			case "response.output_text.delta", "response.content_part.added":
				t.Errorf("event %s in an answer without text", ev.Type)
			case "response.completed":
				completed = &ev.Response
			}
		}
		if err := stream.Err(); err != nil || completed == nil {
			t.Fatalf("no response.completed: %v", err)
		}
		stream.Close()
		if strings.Join(args, " ") != `{"city":"Paris"} {}` {
			t.Errorf("arguments done %q", args)
		}
		check(t, completed, httpResp.Header.Get("X-Request-Id"))
	})
}
