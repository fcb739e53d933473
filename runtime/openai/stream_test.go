package openai

import (
	"bytes"
	"errors"
	"github.com/llmplat/llmplat/runtime/golden"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vllmStream builds the chunks vLLM sends for a two-token answer.
func vllmStream(includeUsage bool) []any {
	base := func(choices []ChunkChoice) ChatCompletionChunk {
		return ChatCompletionChunk{ID: "chatcmpl-0123456789abcdef0123456789abcdef", Object: ObjectChatCompletionChunk,
			Created: 1764633600, Model: "meta-llama/Llama-3.1-8B-Instruct", Choices: choices}
	}
	chunks := []any{
		base([]ChunkChoice{{Delta: Delta{Role: "assistant", Content: String("")}, Logprobs: Null()}}),
		base([]ChunkChoice{{Delta: Delta{Content: String("Hello")}, Logprobs: Null()}}),
		base([]ChunkChoice{{Delta: Delta{Content: String(" world")}, Logprobs: Null(), FinishReason: String(FinishStop), StopReason: Null()}}),
	}
	if includeUsage {
		u := base([]ChunkChoice{})
		u.Usage = NewUsage(12, 2)
		chunks = append(chunks, u)
	}
	return chunks
}

func TestStreamGolden(t *testing.T) {
	tests := []struct {
		name   string
		events []any
		err    *ErrorBody
	}{
		{name: "stream_include_usage", events: vllmStream(true)},
		{name: "stream_no_usage", events: vllmStream(false)},
		{name: "stream_error", events: vllmStream(false)[:2], err: NewEngineError(500, "", "engine died")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewSSEWriter(&buf)
			for _, ev := range tt.events {
				if err := w.WriteJSON(ev); err != nil {
					t.Fatal(err)
				}
			}
			if tt.err != nil {
				if err := w.WriteJSON(tt.err); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.WriteDone(); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, tt.name+".golden", buf.Bytes())
		})
	}
}

// TestReadGolden decodes the golden streams back and checks what a relay
// needs: every chunk, the usage only when asked, the error event, [DONE].
func TestReadGolden(t *testing.T) {
	tests := []struct {
		file      string
		chunks    int
		wantUsage bool
		wantErr   bool
	}{
		{file: "stream_include_usage.golden", chunks: 4, wantUsage: true},
		{file: "stream_no_usage.golden", chunks: 3},
		{file: "stream_error.golden", chunks: 3, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r := NewSSEReader(f)
			var chunks int
			var usage *Usage
			var streamErr *Error
			done := false
			for {
				data, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if IsDone(data) {
					done = true
					continue
				}
				chunks++
				if e := StreamError(data); e != nil {
					streamErr = e
					continue
				}
				var c ChatCompletionChunk
				if err := jsonUnmarshal(data, &c); err != nil {
					t.Fatalf("chunk %d: %v", chunks, err)
				}
				if c.Usage != nil {
					usage = c.Usage
				}
			}
			if !done {
				t.Error("no [DONE] event")
			}
			if chunks != tt.chunks {
				t.Errorf("chunks = %d, want %d", chunks, tt.chunks)
			}
			if got := usage != nil; got != tt.wantUsage {
				t.Errorf("usage present = %v, want %v", got, tt.wantUsage)
			}
			if usage != nil && (usage.PromptTokens != 12 || usage.CompletionTokens != 2 || usage.TotalTokens != 14) {
				t.Errorf("usage = %+v, want 12/2/14", *usage)
			}
			if got := streamErr != nil; got != tt.wantErr {
				t.Errorf("error event present = %v, want %v", got, tt.wantErr)
			}
			if streamErr != nil && streamErr.Status() != 500 {
				t.Errorf("error status = %d, want 500", streamErr.Status())
			}
		})
	}
}

// TestReaderVariants covers what other engines and proxies send: no space
// after "data:", CRLF line ends, comments, multi-line data, a role chunk
// without content and "usage":null on every chunk.
func TestReaderVariants(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string
		end   error
	}{
		{name: "no space", input: "data:{\"a\":1}\n\ndata:[DONE]\n\n", want: []string{`{"a":1}`, "[DONE]"}, end: io.EOF},
		{name: "crlf", input: "data: {\"a\":1}\r\n\r\ndata: [DONE]\r\n\r\n", want: []string{`{"a":1}`, "[DONE]"}, end: io.EOF},
		{name: "comment and fields", input: ": keep-alive\n\nevent: message\nid: 7\ndata: x\n\n", want: []string{"x"}, end: io.EOF},
		{name: "multi-line data", input: "data: a\ndata: b\n\n", want: []string{"a\nb"}, end: io.EOF},
		{name: "cut mid-event", input: "data: {\"a\":1}\n\ndata: {\"b\"", want: []string{`{"a":1}`}, end: io.ErrUnexpectedEOF},
		{name: "long line", input: "data: " + strings.Repeat("x", 100_000) + "\n\n", want: []string{strings.Repeat("x", 100_000)}, end: io.EOF},
		{name: "too large", input: "data: " + strings.Repeat("x", MaxEventBytes+1) + "\n\n", end: ErrEventTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewSSEReader(strings.NewReader(tt.input))
			var got []string
			var err error
			for {
				var data []byte
				data, err = r.Next()
				if err != nil {
					break
				}
				got = append(got, string(data))
			}
			if !errors.Is(err, tt.end) {
				t.Errorf("end = %v, want %v", err, tt.end)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("events = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOtherEngineChunks(t *testing.T) {
	// A role chunk without content and usage:null on every chunk, as some
	// engines send: both decode, and usage stays nil.
	data := []byte(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}],"usage":null}`)
	var c ChatCompletionChunk
	if err := jsonUnmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if c.Usage != nil {
		t.Errorf("usage = %+v, want nil", c.Usage)
	}
	if c.Choices[0].Delta.Role != "assistant" || c.Choices[0].Delta.Content != nil {
		t.Errorf("delta = %+v, want role only", c.Choices[0].Delta)
	}
}
