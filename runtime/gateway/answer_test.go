package gateway

import (
	"fmt"
	"testing"

	"github.com/llmplat/llmplat/runtime/jsonvariant"
)

// oneTokenEvents are an engine's chunks for a one-token answer with
// continuous usage: the role chunk, the content chunk, the usage chunk.
var oneTokenEvents = []struct{ name, data string }{
	{"role", `{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":11,"total_tokens":11,"completion_tokens":0}}`},
	{"content", `{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"values"},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":11,"total_tokens":12,"completion_tokens":1}}`},
	{"usage", `{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":11,"total_tokens":12,"completion_tokens":1}}`},
}

// oddChunks are chunks the scan must leave to encoding/json, or read
// exactly as it would.
var oddChunks = []string{
	`{"id":"a\u00e9\n","model":"m\ud83d","choices":[{"delta":{"content":"x\"y\u20ac","reasoning_content":"r\ud83d\ude00"},"finish_reason":"st\u006fp"}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{"}}]}},{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}`,
	`{"choices":[{"delta":{"content":"a"}},null,{"delta":null},{"delta":{"content":"b"},"finish_reason":null}]}`,
	`{"id":"x","choices":[{"delta":{"content":"a","Content":"b"}}]}`,
	`{"id":"x","ID":"y","choices":[]}`,
	`{"id":"x","choices":[{"delta":{"content":"a"},"delta":{"reasoning_content":"b"}}]}`,
	`{"id":"x","created":1.5,"choices":[{"delta":{"content":"a"}}]}`,
	`{"id":1,"choices":[{"delta":{"content":"a"}}]}`,
	`{"id":"x","choices":[{"delta":{"content":1}}]}`,
	`{"id":"x","choices":{"delta":{"content":"a"}}}`,
	`{"id":"x","choices":[{"delta":{"content":"a"}}]`,
	`{"id":null,"model":null,"created":null,"choices":null,"usage":"whatever"}`,
	`[]`,
	`null`,
}

// answerState is what an answer holds, comparable.
func answerState(a *answer) string {
	return fmt.Sprintf("id=%q model=%q created=%d content=%q reasoning=%q calls=%+v finish=%q",
		a.id, a.model, a.created, a.content.String(), a.reasoning.String(), a.calls, a.finish)
}

// compareAdd applies data to two answers that start alike, by add and by
// the reference — addDecoded, a decode of every chunk, as the buffered
// relay did it before the scan — and reports how they differ. Each
// respelling of data (spaced as Python writes JSON, indented, its members
// reordered) must give add what data gives the reference.
func compareAdd(t *testing.T, data []byte) {
	t.Helper()
	spellings := append([]jsonvariant.Variant{{Name: "as sent", Data: data}}, jsonvariant.Of(data)...)
	for _, start := range []string{"", `{"id":"old","model":"old-model","created":7,"choices":[{"delta":{"content":"before","reasoning_content":"r"},"finish_reason":"length"}]}`} {
		var want answer
		want.finish = "stop"
		if start != "" {
			want.addDecoded([]byte(start))
		}
		want.addDecoded(data)
		for _, v := range spellings {
			var got answer
			got.finish = "stop"
			if start != "" {
				got.addDecoded([]byte(start))
			}
			got.add(v.Data)
			if g, w := answerState(&got), answerState(&want); g != w {
				t.Fatalf("add(%q), %s, after %q:\n got %s\nwant %s", v.Data, v.Name, start, g, w)
			}
		}
	}
}

func TestAnswerAddMatchesReference(t *testing.T) {
	for _, tt := range oneTokenEvents {
		t.Run(tt.name, func(t *testing.T) { compareAdd(t, []byte(tt.data)) })
	}
	for i, c := range oddChunks {
		t.Run(fmt.Sprint("odd ", i), func(t *testing.T) { compareAdd(t, []byte(c)) })
	}
}

func TestAnswerAdd(t *testing.T) {
	a := answer{finish: "stop"}
	for _, c := range []string{
		oneTokenEvents[0].data,
		`{"id":"chatcmpl-e1a5","created":1,"model":"m","choices":[{"delta":{"content":"line\none \u00e9"}}]}`,
		oneTokenEvents[1].data,
	} {
		a.add([]byte(c))
	}
	got := answerState(&a)
	want := `id="chatcmpl-e1a5" model="meta-llama/Llama-3.1-8B-Instruct" created=1796403410 content="line\none évalues" reasoning="" calls=[] finish="length"`
	if got != want {
		t.Errorf("answer = %s; want %s", got, want)
	}
}

// TestAnswerScansCommonChunks: the engine's ordinary chunks are read by
// the scan, not left to encoding/json.
func TestAnswerScansCommonChunks(t *testing.T) {
	for _, tt := range oneTokenEvents {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := scanChunk([]byte(tt.data)); !ok {
				t.Error("scanChunk left the chunk to encoding/json")
			}
		})
	}
}

func FuzzAnswerAdd(f *testing.F) {
	for _, tt := range oneTokenEvents {
		f.Add([]byte(tt.data))
	}
	for _, c := range oddChunks {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"id": "x", "choices": [{"delta": {"content": "hi", "reasoning_content": null}, "finish_reason": "stop"}], "model": "m", "created": 3}`))
	f.Fuzz(func(t *testing.T, data []byte) { compareAdd(t, data) })
}

func BenchmarkAnswerAdd(b *testing.B) {
	impls := []struct {
		name string
		add  func(*answer, []byte)
	}{{"scan", (*answer).add}, {"reference", (*answer).addDecoded}}
	for _, impl := range impls {
		for _, ev := range oneTokenEvents[:2] { // the relay takes the usage chunk's usage, not its text
			data := []byte(ev.data)
			b.Run(impl.name+"/"+ev.name, func(b *testing.B) {
				b.ReportAllocs()
				a := answer{finish: "stop"}
				for b.Loop() {
					impl.add(&a, data)
					a.content.Reset() // one answer's worth of text, as a request has
				}
			})
		}
	}
}
