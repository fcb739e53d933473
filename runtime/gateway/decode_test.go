package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/strictjson"
)

// decodeBodies are a typical small request and a larger one with a system
// message, several turns, streaming options, sampling and a tool.
var decodeBodies = []struct{ name, body string }{
	{"small", `{"model":"llama-8b","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`},
	{"large", `{"model":"llama-8b","stream":true,"stream_options":{"include_usage":true},"temperature":0.7,"max_tokens":256,` +
		`"messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly and cite your sources."},` +
		`{"role":"user","content":"What is the capital of France?"},` +
		`{"role":"assistant","content":"The capital of France is Paris."},` +
		`{"role":"user","content":[{"type":"text","text":"And how many people live there?"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"population","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"2102650"},` +
		`{"role":"user","content":"Thanks. Now compare it with Berlin, please."}],` +
		`"tools":[{"type":"function","function":{"name":"population","description":"The population of a city.",` +
		`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"top_k":40}`},
}

// refDecodeRequest is decodeRequest as it was: json.Unmarshal validates
// the whole body before the decode, and extraBytes formats every
// message's prefix. (strictjson.Check and the request's decode are held
// to their own former selves by their packages' fuzz targets.)
func refDecodeRequest(body []byte) (*openai.ChatCompletionRequest, *openai.ErrorBody) {
	if err := strictjson.Check(body, requestType); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			code := "variant_key"
			if se.Duplicate {
				code = "duplicate_key"
			}
			return nil, openai.NewError(openai.TypeInvalidRequest, code, se.Path, se.Msg)
		}
		return nil, bodyRefusal(body, err)
	}
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, bodyRefusal(body, err)
	}
	if name, n := refExtraBytes(&req); n > MaxExtraBytes {
		return nil, openai.NewError(openai.TypeInvalidRequest, "unknown_fields_too_large", name,
			fmt.Sprintf("fields the API does not define take %d bytes; at most %d are forwarded", n, MaxExtraBytes))
	}
	if err := req.Validate(); err != nil {
		var fe *openai.FieldError
		param := ""
		if errors.As(err, &fe) {
			param = fe.Param
		}
		return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_value", param, err.Error())
	}
	return &req, nil
}

func refExtraBytes(req *openai.ChatCompletionRequest) (largest string, total int) {
	most := -1
	add := func(prefix string, extra map[string]json.RawMessage) {
		for k, v := range extra {
			total += len(k) + len(v)
			if len(v) > most {
				most, largest = len(v), prefix+k
			}
		}
	}
	add("", req.Extra)
	for i := range req.Messages {
		add(fmt.Sprintf("messages[%d].", i), req.Messages[i].Extra)
	}
	return largest, total
}

// FuzzDecodeRequest: decodeRequest answers every body as it did, with the
// same request or the same refusal.
func FuzzDecodeRequest(f *testing.F) {
	for _, b := range decodeBodies {
		f.Add([]byte(b.body))
	}
	for _, s := range []string{
		`{"model":"llama-8b","max_tokens":1,"max_to` + "\u212a" + `ens":8000,"messages":[{"role":"user","content":"hi"}]}`,
		`{"MODEL":"llama-8b","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"llama-8b","messages":[{"role":"user","content":"a","content":"b"}]}`,
		`{"model":"llama-8b","max_tokens":3,"top_k":5,"messages":[{"role":"user","content":"hi","x":{"k":1}}]}`,
		`{"model":"m","messages":[{"role":"robot","content":"x"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`,
		` {"model":"m","messages":[{"role":1}]} `, `{"model":"m","max_tokens":1.5}`, `null`, `{"model":`, `[]`,
		// What the one-pass scan reads itself, and what it leaves.
		`{"model":"mé
","user":"caf` + "Ã©ÿ" + `","messages":[null,{"role":"user","content":null,"refusal":"no","x":[{"a":1}]}],"stop":null,"n":null,"seed":-0,"top_p":1e-2,"stream":null,"logprobs":null}`,
		`{"model":"m","messages":[],"tools":[{"function":{"parameters":{"properties":{"a":{},"A":{}}}}}],"metadata":{"k":"v"},"stream_options":null}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":null,"x":{"y":1,"y":2}}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":1e999,"max_tokens":99999999999999999999}`,
		`{"model":"m","messages":null,"messages2":{}} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gotErr := decodeRequest(body)
		want, wantErr := refDecodeRequest(body)
		if !reflect.DeepEqual(gotErr, wantErr) {
			t.Fatalf("refusal %+v, want %+v: %q", errorOf(gotErr), errorOf(wantErr), body)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, want %+v: %q", got, want, body)
		}
	})
}

func errorOf(e *openai.ErrorBody) any {
	if e == nil {
		return nil
	}
	return e.Error
}

// TestExtraBytesNamesTheField: the largest undefined field is named with
// its message's index.
func TestExtraBytesNamesTheField(t *testing.T) {
	req := &openai.ChatCompletionRequest{
		Extra:    map[string]json.RawMessage{"top_k": json.RawMessage(`5`)},
		Messages: []openai.Message{{}, {Extra: map[string]json.RawMessage{"pad": json.RawMessage(`"xxxx"`)}}},
	}
	name, total := extraBytes(req)
	if name != "messages[1].pad" || total != len("top_k5")+len(`pad"xxxx"`) {
		t.Errorf("extraBytes = %q, %d; want messages[1].pad, %d", name, total, len("top_k5")+len(`pad"xxxx"`))
	}
}

// BenchmarkDecodeRequest compares decodeRequest (the one-pass scan, for
// these bodies) with the two passes it falls back to (strictjson.Check
// and the request's decode, without the validation both share) and with
// the decode before either (json.Unmarshal validating the body first).
func BenchmarkDecodeRequest(b *testing.B) {
	for _, bb := range decodeBodies {
		body := []byte(bb.body)
		for _, impl := range []struct {
			name   string
			decode func([]byte) (*openai.ChatCompletionRequest, *openai.ErrorBody)
		}{{"new", decodeRequest}, {"two-passes", decodeChecked}, {"ref", refDecodeRequest}} {
			b.Run(bb.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, e := impl.decode(body); e != nil {
						b.Fatal(e.Error.Message)
					}
				}
			})
		}
	}
}

// TestBodyRefusalsNameTheField: a field of the wrong type is refused with
// invalid_type, the field as param (a message by its index) and the types
// in the API's terms; a body that is not JSON says so without the
// decoder's package names.
func TestBodyRefusalsNameTheField(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	for _, c := range []struct{ body, code, param, msg string }{
		{`{"model":"m",` + msgs + `,"temperature":"hot"}`, "invalid_type", "temperature",
			`invalid type for "temperature": expected a number, got string`},
		{`{"model":"m",` + msgs + `,"max_tokens":1.5}`, "invalid_type", "max_tokens",
			`invalid type for "max_tokens": expected an integer, got number 1.5`},
		{`{"model":"m",` + msgs + `,"stream":"yes"}`, "invalid_type", "stream",
			`invalid type for "stream": expected a boolean, got string`},
		{`{"model":"m",` + msgs + `,"stream_options":{"include_usage":"y"}}`, "invalid_type", "stream_options.include_usage",
			`invalid type for "stream_options.include_usage": expected a boolean, got string`},
		{`{"model":5,` + msgs + `}`, "invalid_type", "model", `invalid type for "model": expected a string, got number`},
		{`{"model":"m","messages":[{"role":"user","content":"x"},{"role":1,"content":"y"}]}`, "invalid_type", "messages[1].role",
			`invalid type for "messages[1].role": expected a string, got number`},
		{`{"model":"m","messages":["hi"]}`, "invalid_type", "messages[0]", `invalid type for "messages[0]": expected an object, got string`},
		{`{"model":"m","messages":{"role":"user"}}`, "invalid_type", "messages", `invalid type for "messages": expected an array, got object`},
		{`not json`, "invalid_json", "", `the request body is not valid JSON: invalid character 'o' in literal null (expecting 'u')`},
	} {
		_, refusal := decodeRequest([]byte(c.body))
		if refusal == nil {
			t.Errorf("%s: accepted", c.body)
			continue
		}
		e := refusal.Error
		param := ""
		if e.Param != nil {
			param = *e.Param
		}
		if code := string(e.Code); e.Type != openai.TypeInvalidRequest || code != `"`+c.code+`"` || param != c.param || e.Message != c.msg {
			t.Errorf("%s:\n got %s %s %q %q\nwant %s %q %q %q", c.body, e.Type, code, param, e.Message,
				openai.TypeInvalidRequest, c.code, c.param, c.msg)
		}
	}
}
