package openai

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The reference decode below is the one unknownFields replaced: decode
// the body again into a map and delete the names the type encodes. The
// fuzz targets hold the new decode to it, result and error alike.

// refRequest decodes as ChatCompletionRequest did; its messages decode
// as Message does now, which FuzzMessageDecode holds to refMessage.
type refRequest ChatCompletionRequest

func (r *refRequest) UnmarshalJSON(data []byte) error {
	var f requestFields
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	extra, err := refUnknownFields(data, f)
	if err != nil {
		return err
	}
	*r = refRequest(f)
	r.Extra = extra
	return nil
}

// refMessage decodes as Message did.
type refMessage Message

func (m *refMessage) UnmarshalJSON(data []byte) error {
	var f messageFields
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	extra, err := refUnknownFields(data, f)
	if err != nil {
		return err
	}
	*m = refMessage(f)
	m.Extra = extra
	return nil
}

func refUnknownFields(data []byte, known any) (map[string]json.RawMessage, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	for _, k := range refFieldNames(known) {
		delete(all, k)
	}
	if len(all) == 0 {
		return nil, nil
	}
	return all, nil
}

func refFieldNames(v any) []string {
	t := reflect.TypeOf(v)
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "-" || name == "" {
			continue
		}
		names = append(names, name)
	}
	return names
}

// decodeBodies seed the fuzz targets and the benchmarks: a typical small
// request, a larger one, and the bodies of the package's other tests.
var decodeBodies = []string{
	`{"model":"llama-8b","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"llama-8b","stream":true,"stream_options":{"include_usage":true},"temperature":0.7,"max_tokens":256,` +
		`"messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly and cite your sources."},` +
		`{"role":"user","content":"What is the capital of France?"},` +
		`{"role":"assistant","content":"The capital of France is Paris."},` +
		`{"role":"user","content":[{"type":"text","text":"And how many people live there?"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"population","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"2102650"},` +
		`{"role":"user","content":"Thanks. Now compare it with Berlin, please."}],` +
		`"tools":[{"type":"function","function":{"name":"population","description":"The population of a city.",` +
		`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"top_k":40}`,
	`{"model":"llama-8b","messages":[{"role":"user","content":"hi","x_msg":true}],"stream":true,` +
		`"max_tokens":16,"temperature":0,"ignore_eos":true,"top_k":5,"tools":[{"type":"function","function":{"name":"f"}}]}`,
	`{"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","messages":[]}`,
	`{"model":"m","messages":[{"role":"robot","content":"x"}],"n":2,"max_tokens":0}`,
	` { "model" : "m" , "MODEL":"x", "mo\u0064el":"y", "x\u00e9":[1, {"a":"}"}] , "x\u00e9":2, "Extra":{} } `,
	`{"model":"m","messages":[{"ROLE":"user","role":"system","c":"` + "\xff" + `","c\ufffd":1}],"stop":["a"],"n":null}`,
	`{"model":1}`, `{"messages":[1]}`, `{"messages":[{"role":2}]}`, `{"max_tokens":"x"}`, `{"messages":{}}`,
	`null`, `[]`, `"s"`, `{}`, `{"model":`, `{"a":1}{"b":2}`, ``,
}

func FuzzRequestDecode(f *testing.F) {
	for _, s := range decodeBodies {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got ChatCompletionRequest
		gotErr := json.Unmarshal(data, &got)
		var want refRequest
		wantErr := json.Unmarshal(data, &want)
		sameDecode(t, data, gotErr, wantErr, got, ChatCompletionRequest(want))
		// The gateway calls the method itself on a body it has checked.
		var direct ChatCompletionRequest
		if wantErr == nil {
			if err := direct.UnmarshalJSON(data); err != nil || !reflect.DeepEqual(direct, got) {
				t.Fatalf("UnmarshalJSON = %+v, %v; json.Unmarshal = %+v: %q", direct, err, got, data)
			}
		}
	})
}

func FuzzMessageDecode(f *testing.F) {
	for _, s := range decodeBodies {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"role":"user","content":"hi","x_msg":true,"Role":"x","x_msg":[1,2]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got Message
		gotErr := json.Unmarshal(data, &got)
		var want refMessage
		wantErr := json.Unmarshal(data, &want)
		sameDecode(t, data, gotErr, wantErr, got, Message(want))
	})
}

// sameDecode fails t unless both decodes of data agree.
func sameDecode[T any](t *testing.T, data []byte, gotErr, wantErr error, got, want T) {
	t.Helper()
	switch {
	case (gotErr == nil) != (wantErr == nil):
		t.Fatalf("err = %v, want %v: %q", gotErr, wantErr, data)
	case gotErr != nil && gotErr.Error() != wantErr.Error():
		t.Fatalf("err = %q, want %q: %q", gotErr, wantErr, data)
	case gotErr == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("decoded\n%+v\nwant\n%+v\nfrom %q", got, want, data)
	}
}

// refWithExtra is withExtra as it was: encode, decode into a map, encode
// the map.
func refWithExtra(v any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var merged map[string]json.RawMessage
	if err := json.Unmarshal(b, &merged); err != nil {
		return nil, err
	}
	for k, raw := range extra {
		if _, ok := merged[k]; !ok {
			merged[k] = raw
		}
	}
	return json.Marshal(merged)
}

// FuzzRequestEncode: a decoded request encodes to the same bytes as it
// did, or fails alike.
func FuzzRequestEncode(f *testing.F) {
	for _, s := range decodeBodies {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"<a&b>\u2028","z":"<>","model":1}],"stream":true,"b<":"\u2029","max_tokens":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req ChatCompletionRequest
		if json.Unmarshal(data, &req) != nil {
			return
		}
		// The request's messages encode through Message.MarshalJSON in
		// both: each is held to the former encoding on its own.
		got, gotErr := json.Marshal(req)
		want, wantErr := refWithExtra(requestFields(req), req.Extra)
		sameEncoding(t, data, got, want, gotErr, wantErr)
		for _, m := range req.Messages {
			got, gotErr := json.Marshal(m)
			want, wantErr := refWithExtra(messageFields(m), m.Extra)
			sameEncoding(t, data, got, want, gotErr, wantErr)
		}
	})
}

func sameEncoding(t *testing.T, data, got, want []byte, gotErr, wantErr error) {
	t.Helper()
	switch {
	case (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error():
		t.Fatalf("err = %v, want %v: %q", gotErr, wantErr, data)
	case string(got) != string(want):
		t.Fatalf("encoded\n%s\nwant\n%s\nfrom %q", got, want, data)
	}
}

// TestEncodeInvalidExtra: an extra field that is not JSON fails the
// encoding as it did.
func TestEncodeInvalidExtra(t *testing.T) {
	for _, extra := range []map[string]json.RawMessage{
		{"a": json.RawMessage(`{`)},
		{"b": json.RawMessage(`1`), "a": json.RawMessage(`x`), "c": json.RawMessage(`[`)},
		{"a": nil, "<k>": json.RawMessage(` [ "<&>" ] `), "model": json.RawMessage(`"shadowed"`)},
	} {
		r := ChatCompletionRequest{Model: "m", Extra: extra}
		got, gotErr := withExtra(requestFields(r), r.Extra)
		want, wantErr := refWithExtra(requestFields(r), r.Extra)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || string(got) != string(want) {
			t.Errorf("withExtra(%v) = %s, %v; want %s, %v", extra, got, gotErr, want, wantErr)
		}
	}
}
