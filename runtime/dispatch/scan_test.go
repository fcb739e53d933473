package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/llmplat/llmplat/runtime/openai"
)

// The three events an engine sends for a one-token answer with
// continuous usage, as vLLM and the simulator write them.
var commonEvents = []string{
	`{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":11,"total_tokens":11,"completion_tokens":0}}`,
	`{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"values"},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":11,"total_tokens":12,"completion_tokens":1}}`,
	`{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":11,"total_tokens":12,"completion_tokens":1}}`,
}

// parseEventByDecode is ParseEvent as it was before the in-place read:
// the reference the fast path must agree with.
func parseEventByDecode(data []byte) Event {
	ev := Event{Data: data}
	if e := openai.StreamError(data); e != nil {
		ev.Err = e
		return ev
	}
	content := hasContent(data)
	usage := bytes.Contains(data, []byte(`"usage":{`))
	delta := !content && bytes.Contains(data, []byte(`"delta":{`))
	if !usage && !delta {
		if content {
			ev.Tokens = 1
		}
		return ev
	}
	var c struct {
		Choices json.RawMessage `json:"choices"`
		Usage   *openai.Usage   `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil {
		c.Choices, c.Usage = nil, nil
		if delta {
			c.Choices = choicesOf(data)
		}
	}
	if usage && c.Usage != nil {
		if string(bytes.Join(bytes.Fields(c.Choices), nil)) == "[]" {
			ev.Usage = c.Usage
			return ev
		}
		ev.Progress = c.Usage
	}
	if content || (delta && hasOtherOutputByDecode(c.Choices)) {
		ev.Tokens = 1
	}
	return ev
}

// hasOtherOutputByDecode is hasOtherOutput without the in-place read.
func hasOtherOutputByDecode(choices json.RawMessage) bool {
	if len(choices) == 0 {
		return false
	}
	var c []struct {
		Delta map[string]json.RawMessage `json:"delta"`
	}
	if json.Unmarshal(choices, &c) != nil {
		return false
	}
	for _, ch := range c {
		for k, v := range ch.Delta {
			if k == "role" {
				continue
			}
			switch string(bytes.TrimSpace(v)) {
			case "", "null", `""`, "[]", "{}":
				continue
			}
			return true
		}
	}
	return false
}

// TestCommonEventsAreReadInPlace: the events of an ordinary stream take
// the fast path, and give what the decode gives.
func TestCommonEventsAreReadInPlace(t *testing.T) {
	for i, e := range commonEvents {
		choices, usage, ok := eventFields([]byte(e))
		if !ok || choices == nil || usage == nil {
			t.Errorf("event %d: read in place = %v (choices %q, usage %v), want its choices and usage", i, ok, choices, usage)
		}
		if _, ok := otherOutput(choices); !ok {
			t.Errorf("event %d: its choices were not read in place", i)
		}
		if got, want := ParseEvent([]byte(e)), parseEventByDecode([]byte(e)); !reflect.DeepEqual(got, want) {
			t.Errorf("event %d: ParseEvent = %+v, want %+v", i, got, want)
		}
	}
}

// TestUnusualEventsGoToTheDecode: what the in-place read does not read
// exactly is left to encoding/json.
func TestUnusualEventsGoToTheDecode(t *testing.T) {
	for _, e := range []string{
		`{"choices":[],"usage":{"prompt_tokens":1.0}}`,                 // not a plain integer
		`{"choices":[],"usage":{"prompt_tokens":-1}}`,                  // signed
		`{"choices":[],"usage":{"Prompt_Tokens":1}}`,                   // encoding/json folds the case
		`{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens":2}}`, // the last wins
		`{"choices":[],"Usage":{"prompt_tokens":1}}`,
		`{"choices":[],"us\u0061ge":{"prompt_tokens":1}}`,
		`{"choices":[],"usage":{"prompt_tokens":1},"usage":{"total_tokens":2}}`,
		`{"choices":[],"usage":{"prompt_tokens":1}`, // not valid JSON
		`[1,2]`,
	} {
		if _, _, ok := eventFields([]byte(e)); ok {
			t.Errorf("%s was read in place, want it left to the decode", e)
		}
	}
	for _, c := range []string{
		`[{"delta":{"content":"a","content":""}}]`, // a map keeps the last
		`[{"Delta":{"content":"a"}}]`,
		`[{"delta":{"c\u006fntent":"a"}}]`,
		`[null]`,
		`{"delta":{}}`,
	} {
		if _, ok := otherOutput([]byte(c)); ok {
			t.Errorf("choices %s were read in place, want them left to the decode", c)
		}
	}
}

// FuzzParseEventMatchesDecode: for any event, ParseEvent gives what the
// decode gives.
func FuzzParseEventMatchesDecode(f *testing.F) {
	for _, e := range commonEvents {
		f.Add([]byte(e))
	}
	for _, e := range []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":""}}],"usage":{"prompt_tokens":1,"total_tokens":1,"completion_tokens":0}}`,
		`{"choices":[ ],"usage":{"prompt_tokens":1,"total_tokens":3,"completion_tokens":2,"prompt_tokens_details":null}}`,
		`{"choices":[{"delta":{"content":"a","content":""}}],"usage":{"prompt_tokens":1}}`,
		`{"choices":[],"usage":{"prompt_tokens":1},"usage":null}`,
		`{"error":{"message":"x","type":"InternalServerError","param":null,"code":500}}`,
	} {
		f.Add([]byte(e))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, want := ParseEvent(data), parseEventByDecode(data)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseEvent(%s) = %+v (usage %v, progress %v), want %+v (usage %v, progress %v)",
				data, got, got.Usage, got.Progress, want, want.Usage, want.Progress)
		}
		if c := bytes.TrimSpace(data); len(c) > 0 && c[0] == '{' {
			var raw struct {
				Choices json.RawMessage `json:"choices"`
			}
			if json.Unmarshal(data, &raw) == nil && json.Valid(raw.Choices) {
				if got, want := hasOtherOutput(raw.Choices), hasOtherOutputByDecode(raw.Choices); got != want {
					t.Fatalf("hasOtherOutput(%s) = %v, want %v", raw.Choices, got, want)
				}
			}
		}
	})
}

func BenchmarkParseEvent(b *testing.B) {
	for _, tc := range []struct {
		name  string
		parse func([]byte) Event
	}{{"in-place", ParseEvent}, {"decode", parseEventByDecode}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			events := make([][]byte, len(commonEvents))
			for i, e := range commonEvents {
				events[i] = []byte(e)
			}
			for b.Loop() {
				for _, e := range events {
					tc.parse(e)
				}
			}
		})
	}
}

// TestStreamsWithUsage: EngineBody's form is recognised without a
// decode; anything else is left to the decode.
func TestStreamsWithUsage(t *testing.T) {
	one := int64(1)
	body, err := EngineBody(&openai.ChatCompletionRequest{Model: "m", MaxTokens: &one,
		Messages: []openai.Message{{Role: "user", Content: json.RawMessage(`"hi"`)}}}, "served")
	if err != nil {
		t.Fatal(err)
	}
	if !StreamsWithUsage(body) {
		t.Errorf("EngineBody's %s was not recognised", body)
	}
	for _, b := range []string{
		`{"stream":true}`,
		`{"stream":false,"stream_options":{"include_usage":true}}`,
		`{"stream":true,"stream_options":{"include_usage":false}}`,
		`{"stream":true,"stream_options":{"include_usage":true},"Stream":false}`,
		`{"stream":true,"stream_options":{"include_usage":true,"Include_Usage":false}}`,
		`{"stream":true,"stream":false,"stream_options":{"include_usage":true}}`,
		`{"str\u0065am":true,"stream_options":{"include_usage":true}}`,
		`{"stream":true,"stream_options":{"include_usage":true}`,
		`{"stream":true,"stream_options":null}`,
	} {
		if StreamsWithUsage([]byte(b)) {
			t.Errorf("%s was recognised, want it left to the decode", b)
		}
	}
}

// FuzzStreamsWithUsage: whatever StreamsWithUsage recognises, the decode
// reads as a stream with its usage.
func FuzzStreamsWithUsage(f *testing.F) {
	for _, b := range []string{
		`{"model":"m","stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
		`{"stream":true,"stream_options":{"include_usage":true},"STREAM":false}`,
		`{"stream":true,"stream_options":{"include_usage":true,"include_usagE":false}}`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !StreamsWithUsage(body) {
			return
		}
		var probe struct {
			Stream        bool `json:"stream"`
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(body, &probe); err != nil {
			t.Fatalf("recognised %s, which does not decode: %v", body, err)
		}
		if !probe.Stream || probe.StreamOptions == nil || !probe.StreamOptions.IncludeUsage {
			t.Fatalf("recognised %s, which decodes as %+v", body, probe)
		}
	})
}

// finishReasonByDecode is how the agent read a chunk's finish reason
// before the in-place read.
func finishReasonByDecode(data []byte) (string, error) {
	var c openai.ChatCompletionChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return "", err
	}
	for _, ch := range c.Choices {
		if ch.FinishReason != nil {
			return *ch.FinishReason, nil
		}
	}
	return "", nil
}

func TestFinishReason(t *testing.T) {
	for _, tc := range []struct {
		data    string
		want    string
		inPlace bool
	}{
		{commonEvents[1], "length", true},
		{commonEvents[0], "", true},
		{commonEvents[2], "", true},
		{`{"choices":[{"finish_reason":null},{"finish_reason":"stop"}]}`, "stop", true},
		{`{"choices":[{"finish_reason":""}]}`, "", true},
		{`{"choices":[{"finish_reason":"st\u006fp"}]}`, "", false},
		{"{\"choices\":[{\"finish_reason\":\"\xfe\"}]}", "", false},
		{`{"choices":[{"finish_reason":"stöp"}]}`, "stöp", true},
		{`{"choices":[{"Finish_Reason":"stop"}]}`, "", false},
		{`{"choices":[{"finish_reason":"stop","finish_reason":"length"}]}`, "", false},
		{`{"Choices":[{"finish_reason":"stop"}]}`, "", false},
		{`{"choices":[{"finish_reason":5}]}`, "", false},
		{`{"choices":[{"finish_reason":"stop"}]`, "", false},
	} {
		got, ok := FinishReason([]byte(tc.data))
		if ok != tc.inPlace || got != tc.want {
			t.Errorf("FinishReason(%s) = %q, %v; want %q, %v", tc.data, got, ok, tc.want, tc.inPlace)
		}
	}
}

// FuzzFinishReason: where the decode reads a chunk, the in-place read
// gives the same reason; where it refuses one (a field of an odd type),
// the in-place read may still give the choices' reason.
func FuzzFinishReason(f *testing.F) {
	for _, e := range commonEvents {
		f.Add([]byte(e))
	}
	f.Add([]byte(`{"choices":[{"finish_reason":null},{"finish_reason":"stop"}]}`))
	f.Add([]byte(`{"id":5,"choices":[{"finish_reason":"stop"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := FinishReason(data)
		if !ok {
			return
		}
		want, err := finishReasonByDecode(data)
		if err == nil && got != want {
			t.Fatalf("FinishReason(%s) = %q, want %q", data, got, want)
		}
		if err != nil {
			var typeErr *json.UnmarshalTypeError
			if !errors.As(err, &typeErr) {
				t.Fatalf("FinishReason(%s) = %q in place, but the decode fails for another reason: %v", data, got, err)
			}
		}
	})
}
