package internalhop

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/jsonscan"
	"github.com/llmplat/llmplat/runtime/openai"
)

// answerEvents are a short answer's events as vLLM sends them with
// continuous usage: the role chunk, five tokens, the finish, the usage.
var answerEvents = func() [][]byte {
	const head = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":`
	evs := [][]byte{[]byte(head + `[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":11,"total_tokens":11,"completion_tokens":0}}`)}
	for range 5 {
		evs = append(evs, []byte(head+`[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":11,"total_tokens":12,"completion_tokens":1}}`))
	}
	return append(evs,
		[]byte(head+`[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":11,"total_tokens":17,"completion_tokens":6}}`),
		[]byte(head+`[],"usage":{"prompt_tokens":11,"total_tokens":17,"completion_tokens":6}}`))
}()

// BenchmarkGatewayRead is what the gateway spends reading one answer of
// eight events off the internal hop: "records" as built (the orchestrator's
// parse carried as a typed tail), and "sse+parse" as the hop was before,
// server-sent events that the gateway parsed again and checked for
// repeated keys.
func BenchmarkGatewayRead(b *testing.B) {
	var records bytes.Buffer
	for _, e := range answerEvents {
		ev := engineclient.ParseEvent(e)
		records.Write(appendEvent(nil, &ev))
	}
	records.WriteByte(tagDone)
	var sse bytes.Buffer
	w := openai.NewSSEWriter(&sse)
	for _, e := range answerEvents {
		_ = w.WriteData(e)
	}
	_ = w.WriteDone()

	b.Run("records", func(b *testing.B) {
		wire := records.Bytes()
		b.ReportAllocs()
		for b.Loop() {
			rr := recordReader{r: bufio.NewReaderSize(bytes.NewReader(wire), readBufferSize)}
			for {
				var ev dispatch.Event
				done, err := rr.next(&ev)
				if err != nil {
					b.Fatal(err)
				}
				if done {
					break
				}
			}
		}
	})
	b.Run("sse+parse", func(b *testing.B) {
		wire := sse.Bytes()
		b.ReportAllocs()
		for b.Loop() {
			r := openai.NewSSEReader(bytes.NewReader(wire))
			for {
				data, err := r.Next()
				if err != nil {
					b.Fatal(err)
				}
				if openai.IsDone(data) {
					break
				}
				_ = engineclient.ParseEvent(data)
				_, _ = jsonscan.DuplicateKey(data)
			}
		}
	})
}
