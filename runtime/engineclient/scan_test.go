package engineclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"reflect"
	"testing"

	"github.com/llmplat/llmplat/runtime/jsonscan"
	"github.com/llmplat/llmplat/runtime/jsonvariant"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// The three events an engine sends for a one-token answer with
// continuous usage, as vLLM and the simulator write them.
var commonEvents = []string{
	`{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":11,"total_tokens":11,"completion_tokens":0}}`,
	`{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"values"},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":11,"total_tokens":12,"completion_tokens":1}}`,
	`{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":11,"total_tokens":12,"completion_tokens":1}}`,
}

// parseEventByDecode is ParseEvent by encoding/json alone: the reference
// the in-place read must agree with. It reads what an event's JSON means,
// not how it is spelled: the usage object (decoded apart from the
// choices), whether the choices are an empty array, and whether a
// choice's delta has a member other than the role whose value is not
// empty.
func parseEventByDecode(data []byte) dispatch.Event {
	ev := dispatch.Event{Data: data}
	if e := openai.StreamError(data); e != nil {
		ev.Err = e
		return ev
	}
	var c struct {
		Choices json.RawMessage `json:"choices"`
		Usage   json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil {
		if looksLikeContent(data) {
			ev.Tokens = 1
		}
		return ev
	}
	var usage *openai.Usage
	if json.Unmarshal(c.Usage, &usage) != nil {
		usage = nil
	}
	var choices []any
	noChoices := json.Unmarshal(c.Choices, &choices) == nil && choices != nil && len(choices) == 0
	if usage != nil {
		if noChoices {
			ev.Usage = usage
			return ev
		}
		ev.Progress = usage
	}
	if hasOtherOutputByDecode(c.Choices) {
		ev.Tokens = 1
		ev.Text, ev.Calls = saidByDecodeRef(c.Choices)
	}
	return ev
}

// saidByDecodeRef counts what the deltas' output says by encoding/json
// alone: each text member's string, and each tool call's function name
// and arguments when they are strings (a call, when the name is not
// empty), the calls decoded into structs, one by one.
func saidByDecodeRef(choices json.RawMessage) (tokens.Text, int64) {
	var c []struct {
		Delta map[string]json.RawMessage `json:"delta"`
	}
	if json.Unmarshal(choices, &c) != nil {
		return tokens.Text{}, 0
	}
	var (
		text  tokens.Text
		calls int64
	)
	str := func(raw json.RawMessage) (string, bool) {
		var s *string
		if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || s == nil {
			return "", false
		}
		return *s, true
	}
	function := func(raw json.RawMessage) {
		var f struct {
			Name, Arguments json.RawMessage
		}
		if len(raw) == 0 || json.Unmarshal(raw, &f) != nil {
			return
		}
		if s, ok := str(f.Name); ok {
			text.Add(tokens.TextOf(s))
			if s != "" {
				calls++
			}
		}
		if s, ok := str(f.Arguments); ok {
			text.Add(tokens.TextOf(s))
		}
	}
	for _, ch := range c {
		for k, v := range ch.Delta {
			switch k {
			case "content", "reasoning_content", "reasoning", "refusal":
				if s, ok := str(v); ok {
					text.Add(tokens.TextOf(s))
				}
			case "tool_calls":
				var calls []struct{ Function json.RawMessage }
				if json.Unmarshal(v, &calls) == nil {
					for _, call := range calls {
						function(call.Function)
					}
					continue
				}
				// One call that does not decode leaves the others.
				var raws []json.RawMessage
				if json.Unmarshal(v, &raws) == nil {
					for _, r := range raws {
						var call struct{ Function json.RawMessage }
						if json.Unmarshal(r, &call) == nil {
							function(call.Function)
						}
					}
				}
			case "function_call":
				function(v)
			}
		}
	}
	return text, calls
}

// hasOtherOutputByDecode is hasOtherOutput without the in-place read.
func hasOtherOutputByDecode(choices json.RawMessage) bool {
	var c []struct {
		Delta map[string]any `json:"delta"`
	}
	if len(choices) == 0 || json.Unmarshal(choices, &c) != nil {
		return false
	}
	for _, ch := range c {
		for k, v := range ch.Delta {
			if k != "role" && !emptyDecoded(v) {
				return true
			}
		}
	}
	return false
}

// emptyDecoded reports whether a decoded value is null, "", [] or {}.
func emptyDecoded(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// TestCommonEventsAreReadInPlace: the events of an ordinary stream take
// the fast path, and give what the decode gives.
func TestCommonEventsAreReadInPlace(t *testing.T) {
	for i, e := range commonEvents {
		r, ok := readEvent([]byte(e))
		if !ok || r.usage == nil {
			t.Errorf("event %d: read in place = %v (%+v), want its usage", i, ok, r)
		}
		if got, want := Classify([]byte(e)), parseEventByDecode([]byte(e)); !reflect.DeepEqual(got, want) {
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
		`{"choices":[],"usage":{"prompt_tokens":1}`,            // not valid JSON
		`{"choices":[{"delta":{"content":"a","content":""}}]}`, // a map keeps the last
		`{"choices":[{"Delta":{"content":"a"}}]}`,
		`{"choices":[{"delta":{"c\u006fntent":"a"}}]}`,
		`{"choices":[null]}`,
		`{"choices":{"delta":{}}}`,
		`[1,2]`,
	} {
		if _, ok := readEvent([]byte(e)); ok {
			t.Errorf("%s was read in place, want it left to the decode", e)
		}
	}
}

// checkParseEvent holds ParseEvent to the decode for data and for each
// respelling of it (spaced, indented, its members reordered): every
// spelling tells what the compact one tells.
func checkParseEvent(t *testing.T, data []byte) {
	t.Helper()
	got, want := Classify(data), parseEventByDecode(data)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseEvent(%s) = %+v (usage %v, progress %v), want %+v (usage %v, progress %v)",
			data, got, got.Usage, got.Progress, want, want.Usage, want.Progress)
	}
	// ParseEvent is the classification, and what the gateway needs on
	// top: whether a key repeats, where to edit.
	full := ParseEvent(data)
	if dup, ok := jsonscan.DuplicateKey(data); full.Duplicate != (dup || !ok && json.Valid(data)) {
		t.Fatalf("ParseEvent(%s) says duplicate %v", data, full.Duplicate)
	}
	classified := full
	classified.Duplicate = false
	if err := sameEvent(classified, got); err != nil {
		t.Fatalf("ParseEvent(%s) classifies otherwise: %v", data, err)
	}
	if !full.SpansFit() {
		t.Fatalf("ParseEvent(%s) located %+v outside it", data, full)
	}
	if out := full.Rewrite(nil, nil, false); !bytes.Equal(out, data) {
		t.Fatalf("ParseEvent(%s): an edit of nothing gave %s", data, out)
	}
	for _, v := range jsonvariant.Of(data) {
		if err := sameEvent(Classify(v.Data), got); err != nil {
			t.Fatalf("ParseEvent of %s %s, of %s: %v", v.Name, v.Data, data, err)
		}
		if err := sameEvent(parseEventByDecode(v.Data), got); err != nil {
			t.Fatalf("the decode of %s %s, of %s: %v", v.Name, v.Data, data, err)
		}
	}
	if c := bytes.TrimSpace(data); len(c) > 0 && c[0] == '{' {
		var raw struct {
			Choices json.RawMessage `json:"choices"`
		}
		if json.Unmarshal(data, &raw) == nil && json.Valid(raw.Choices) {
			if got, _ := hasOtherOutput(raw.Choices); got != hasOtherOutputByDecode(raw.Choices) {
				want := !got
				t.Fatalf("hasOtherOutput(%s) = %v, want %v", raw.Choices, got, want)
			}
		}
	}
}

// FuzzParseEventMatchesDecode: for any event, however spelled, ParseEvent
// gives what the decode gives.
func FuzzParseEventMatchesDecode(f *testing.F) {
	for _, e := range commonEvents {
		f.Add([]byte(e))
	}
	for _, e := range pythonEvents {
		f.Add([]byte(e.spaced))
	}
	for _, e := range []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":""}}],"usage":{"prompt_tokens":1,"total_tokens":1,"completion_tokens":0}}`,
		`{"choices":[ ],"usage":{"prompt_tokens":1,"total_tokens":3,"completion_tokens":2,"prompt_tokens_details":null}}`,
		`{"choices":[{"delta":{"content":"a","content":""}}],"usage":{"prompt_tokens":1}}`,
		`{"choices":[{"delta":{"tool_calls":[ ],"refusal":{ }}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":1},"usage":null}`,
		`{"choices": [{"delta": {"content": "hi"}}], "usage": {"prompt_tokens": "5"}}`,
		`{"choices": [{"delta": {"content": "hi"}}]`,
		`{"error":{"message":"x","type":"InternalServerError","param":null,"code":500}}`,
	} {
		f.Add([]byte(e))
	}
	for _, tt := range textEvents {
		f.Add([]byte(tt.event))
	}
	f.Fuzz(checkParseEvent)
}

// textEvents are chunks whose output the platform counts (Event.Text),
// with the counts: content, reasoning, refusals and tool calls, escapes
// decoded.
var textEvents = []struct {
	event string
	text  tokens.Text
	calls int64
}{
	{`{"choices":[{"index":0,"delta":{"content":" the model"}}]}`, tokens.Text{Bytes: 10, Words: 2, Inner: 2, Tokens: 2}, 0},
	{`{"choices":[{"index":0,"delta":{"content":"lo wor\u00e9\n"}}]}`, tokens.Text{Bytes: 9, Words: 2, Inner: 1, Tokens: 2}, 0},
	{`{"choices":[{"index":0,"delta":{"reasoning_content":"a b","content":"c"}}]}`, tokens.Text{Bytes: 4, Words: 3, Inner: 1, Tokens: 3}, 0},
	{`{"choices":[{"index":0,"delta":{"reasoning":"abcdefghi"}}]}`, tokens.Text{Bytes: 9, Words: 1, Tokens: 2}, 0},
	{`{"choices":[{"index":0,"delta":{"refusal":"no"}}]}`, tokens.Text{Bytes: 2, Words: 1, Tokens: 1}, 0},
	{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
		tokens.Text{Bytes: 11, Words: 1, Tokens: 2}, 1},
	{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Paris\"}"}}]}}]}`,
		tokens.Text{Bytes: 17, Words: 2, Inner: 1, Tokens: 2}, 0},
	{`{"choices":[{"index":0,"delta":{"tool_calls":[5,null,{"function":null},{"function":{"name":"f","arguments":7}},{"function":{"name":"","arguments":"x"}}]}}]}`,
		tokens.Text{Bytes: 2, Words: 2, Tokens: 2}, 1},
	{`{"choices":[{"index":0,"delta":{"function_call":{"name":"f","arguments":"{}"}}}]}`, tokens.Text{Bytes: 3, Words: 2, Tokens: 2}, 1},
	{`{"choices":[{"index":0,"delta":{"content":5,"refusal":null}}]}`, tokens.Text{}, 0},
	{`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, tokens.Text{}, 0},
	{`{"choices":[{"index":0,"delta":{"content":"a","content":"bc d"}}]}`, tokens.Text{Bytes: 4, Words: 2, Inner: 1, Tokens: 2}, 0},
	{`{"choices":[{"index":0,"delta":{"tool_calls":[{"FUNCTION":{"name":"f"}}]}}]}`, tokens.Text{Bytes: 1, Words: 1, Tokens: 1}, 1},
	{`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, tokens.Text{}, 0},
}

// TestParseEventCountsText: the output's text is counted as a client
// decodes it, whichever path reads the event.
func TestParseEventCountsText(t *testing.T) {
	for _, tt := range textEvents {
		ev := ParseEvent([]byte(tt.event))
		if ev.Text != tt.text || ev.Calls != tt.calls {
			t.Errorf("ParseEvent(%s) counts %+v and %d calls, want %+v and %d", tt.event, ev.Text, ev.Calls, tt.text, tt.calls)
		}
		checkParseEvent(t, []byte(tt.event))
	}
}

func BenchmarkParseEvent(b *testing.B) {
	for _, tc := range []struct {
		name  string
		parse func([]byte) dispatch.Event
	}{{"in-place", ParseEvent}, {"classify", Classify}, {"decode", parseEventByDecode}} {
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

// TestStreamsWithUsage: the engine body's form (dispatch.Job.EngineBody) is recognised without a
// decode; anything else is left to the decode.
func TestStreamsWithUsage(t *testing.T) {
	one := int64(1)
	j, err := dispatch.NewJob("req_1", &openai.ChatCompletionRequest{Model: "m", MaxTokens: &one,
		Messages: []openai.Message{{Role: "user", Content: json.RawMessage(`"hi"`)}}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	body := j.EngineBody("served")
	if !StreamsWithUsage(body) {
		t.Errorf("the engine body %s was not recognised", body)
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
// reads as a stream with its usage; and it recognises a body however the
// body is spelled.
func FuzzStreamsWithUsage(f *testing.F) {
	for _, b := range []string{
		`{"model":"m","stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
		`{"stream":true,"stream_options":{"include_usage":true},"STREAM":false}`,
		`{"stream":true,"stream_options":{"include_usage":true,"include_usagE":false}}`,
	} {
		f.Add([]byte(b))
	}
	f.Add([]byte(`{"model": "m", "stream": true, "stream_options": {"include_usage": true}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		recognised := StreamsWithUsage(body)
		for _, v := range jsonvariant.Of(body) {
			if got := StreamsWithUsage(v.Data); got != recognised {
				t.Fatalf("StreamsWithUsage(%s) = %v, but %v for its %s form %s", body, recognised, got, v.Name, v.Data)
			}
		}
		if !recognised {
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
// the in-place read may still give the choices' reason. Every spelling of
// a chunk gives the same answer.
func FuzzFinishReason(f *testing.F) {
	for _, e := range commonEvents {
		f.Add([]byte(e))
	}
	f.Add([]byte(`{"choices":[{"finish_reason":null},{"finish_reason":"stop"}]}`))
	f.Add([]byte(`{"id":5,"choices":[{"finish_reason":"stop"}]}`))
	f.Add([]byte(`{"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := FinishReason(data)
		for _, v := range jsonvariant.Of(data) {
			if r, vok := FinishReason(v.Data); r != got || vok != ok {
				t.Fatalf("FinishReason(%s) = %q, %v, but %q, %v for its %s form %s", data, got, ok, r, vok, v.Name, v.Data)
			}
		}
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
