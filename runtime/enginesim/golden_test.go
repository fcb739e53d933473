package enginesim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/golden"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// TestGoldenStream streams with stepping, one token per step, so the bytes
// are deterministic, and checks them against the golden files and against
// vLLM's format rule by rule.
func TestGoldenStream(t *testing.T) {
	tests := []struct {
		name       string
		golden     string
		fields     map[string]any
		faults     Faults
		wantFinish string // "" when the stream ends with an error
		wantUsage  bool
	}{
		{"natural stop with usage", "stream_usage.golden",
			map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}}, Faults{}, "stop", true},
		{"length without usage", "stream_length.golden",
			map[string]any{"stream": true, "max_tokens": 3}, Faults{}, "length", false},
		{"engine death mid-stream", "stream_death.golden",
			map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}}, Faults{DieAfterTokens: 3}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.MeanAnswerTokens = 8 // short natural answers: 4 to 12 tokens
			cfg.Faults = tt.faults
			s := newTestSim(t, cfg)
			srv := serve(t, s)
			resp := post(context.Background(), t, srv.URL, chatBody(t, s, "Why does memory set the batch size?", tt.fields))
			defer resp.Body.Close()
			if got, want := resp.Header.Get("Content-Type"), "text/event-stream; charset=utf-8"; got != want {
				t.Errorf("content-type = %q, want %q", got, want)
			}
			testenv.Eventually(t, "the request to queue", func() bool { return s.Stats().Waiting == 1 })
			var stream bytes.Buffer
			br := bufio.NewReader(resp.Body)
			for !stepAndRead(t, s, br, &stream) {
			}
			if rest, _ := io.ReadAll(br); len(rest) > 0 {
				t.Errorf("bytes after [DONE]: %q", rest)
			}
			golden.Check(t, tt.golden, stream.Bytes())
			checkStreamFormat(t, stream.Bytes(), tt.wantFinish, tt.wantUsage)
		})
	}
}

// checkStreamFormat checks a stream against vLLM's format: a role chunk
// with empty content first, content chunks, the finish reason and a null
// stop_reason on the last one, the usage chunk only when asked for, and
// [DONE] last; usage agrees with the text.
func checkStreamFormat(t *testing.T, stream []byte, wantFinish string, wantUsage bool) {
	t.Helper()
	events := strings.SplitAfter(string(stream), "\n\n")
	events = events[:len(events)-1] // after the last separator
	if !strings.HasPrefix(events[0], `data: {"id":"chatcmpl-`) ||
		!strings.HasSuffix(events[0], `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n") {
		t.Errorf("first event is not the role chunk: %s", events[0])
	}
	if got := events[len(events)-1]; got != "data: [DONE]\n\n" {
		t.Errorf("last event = %q, want [DONE]", got)
	}
	var content strings.Builder
	var usage *openai.Usage
	for i, ev := range events[1 : len(events)-1] {
		data := strings.TrimSuffix(strings.TrimPrefix(ev, "data: "), "\n\n")
		if e := openai.StreamError([]byte(data)); e != nil {
			if wantFinish != "" || i != len(events)-3 || e.Status() != 500 || e.Type != "InternalServerError" {
				t.Errorf("unexpected error event %s", data)
			}
			continue
		}
		var c openai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if c.Usage != nil {
			usage = c.Usage
			if !strings.Contains(data, `"choices":[],"usage":{"prompt_tokens":`) {
				t.Errorf("usage chunk not in vLLM's shape: %s", data)
			}
			continue
		}
		if strings.Contains(data, `"usage"`) {
			t.Errorf("content chunk carries usage: %s", data)
		}
		content.WriteString(*c.Choices[0].Delta.Content)
		last := i == len(events)-3 || (wantUsage && i == len(events)-4)
		switch {
		case last && wantFinish != "":
			if want := `"finish_reason":"` + wantFinish + `","stop_reason":null}]}`; !strings.HasSuffix(data, want) {
				t.Errorf("last content chunk %s does not end with %s", data, want)
			}
		case !strings.HasSuffix(data, `"logprobs":null,"finish_reason":null}]}`):
			t.Errorf("content chunk %d not in vLLM's shape: %s", i, data)
		}
	}
	if (usage != nil) != wantUsage {
		t.Fatalf("usage chunk present = %v, want %v", usage != nil, wantUsage)
	}
	if usage != nil && usage.CompletionTokens != tokens.Count(content.String()) {
		t.Errorf("usage completion_tokens = %d, tokens.Count(content) = %d", usage.CompletionTokens, tokens.Count(content.String()))
	}
}

func TestGoldenCompletion(t *testing.T) {
	s := newTestSim(t, testConfig())
	srv := serve(t, s)
	body := chatBody(t, s, "Why does memory set the batch size?", map[string]any{"max_tokens": 6})
	got := make(chan []byte, 1)
	go func() {
		resp := post(context.Background(), t, srv.URL, body)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- b
	}()
	testenv.Eventually(t, "the request to queue", func() bool { return s.Stats().Waiting == 1 })
	for {
		if _, ok := s.Step(context.Background()); !ok {
			break
		}
	}
	b := <-got
	golden.Check(t, "completion.golden", b)
	var c openai.ChatCompletion
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Usage.CompletionTokens, tokens.Count(*c.Choices[0].Message.Content); got != want || got != 6 {
		t.Errorf("completion_tokens = %d, tokens.Count(content) = %d, want both 6", got, want)
	}
	if c.Choices[0].FinishReason != openai.FinishLength {
		t.Errorf("finish_reason = %q, want length", c.Choices[0].FinishReason)
	}
}
