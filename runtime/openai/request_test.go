package openai

import (
	"encoding/json"
	"errors"
	"testing"
)

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

func TestRequestKeepsUnknownFields(t *testing.T) {
	in := `{"model":"llama-8b","messages":[{"role":"user","content":"hi","x_msg":true}],"stream":true,` +
		`"max_tokens":16,"temperature":0,"ignore_eos":true,"top_k":5,"tools":[{"type":"function","function":{"name":"f"}}]}`
	var req ChatCompletionRequest
	if err := json.Unmarshal([]byte(in), &req); err != nil {
		t.Fatal(err)
	}
	if req.Temperature == nil || *req.Temperature != 0 {
		t.Errorf("temperature = %v, want explicit 0", req.Temperature)
	}
	if got := string(req.Extra["ignore_eos"]); got != "true" {
		t.Errorf("extra ignore_eos = %q, want true", got)
	}
	if got := string(req.Messages[0].Extra["x_msg"]); got != "true" {
		t.Errorf("message extra = %q, want true", got)
	}
	out, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var gotMap, wantMap map[string]any
	if err := json.Unmarshal(out, &gotMap); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(in), &wantMap); err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(gotMap)
	wantJSON, _ := json.Marshal(wantMap)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("round trip lost data\ngot:  %s\nwant: %s", gotJSON, wantJSON)
	}
}

func TestMessageText(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{name: "string", content: `"hello"`, want: "hello"},
		{name: "parts", content: `[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"http://x"}},{"type":"text","text":"b"}]`, want: "a\nb"},
		{name: "null", content: `null`, want: ""},
		{name: "absent", content: ``, want: ""},
		{name: "garbage", content: `42`, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Message{Role: "user", Content: json.RawMessage(tt.content)}
			if got := m.Text(); got != tt.want {
				t.Errorf("Text() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name, body, param string
	}{
		{name: "ok", body: `{"model":"m","messages":[{"role":"user","content":"x"}]}`},
		{name: "no model", body: `{"messages":[{"role":"user","content":"x"}]}`, param: "model"},
		{name: "no messages", body: `{"model":"m","messages":[]}`, param: "messages"},
		{name: "bad role", body: `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, param: "messages[0].role"},
		{name: "zero max_tokens", body: `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0}`, param: "max_tokens"},
		{name: "n=2", body: `{"model":"m","messages":[{"role":"user","content":"x"}],"n":2}`, param: "n"},
		{name: "stream_options without stream", body: `{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`, param: "stream_options"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req ChatCompletionRequest
			if err := json.Unmarshal([]byte(tt.body), &req); err != nil {
				t.Fatal(err)
			}
			err := req.Validate()
			var fe *FieldError
			switch {
			case tt.param == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.param != "" && !errors.As(err, &fe):
				t.Errorf("Validate() = %v, want a FieldError for %s", err, tt.param)
			case tt.param != "" && fe.Param != tt.param:
				t.Errorf("param = %q, want %q", fe.Param, tt.param)
			}
		})
	}
}

func TestErrorShapes(t *testing.T) {
	tests := []struct {
		name string
		body *ErrorBody
		want string
	}{
		{name: "openai style", body: NewError(TypeRateLimit, "rate_limit_exceeded", "", "slow down"),
			want: `{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`},
		{name: "openai no code", body: NewError(TypeInvalidRequest, "", "messages", "bad"),
			want: `{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":null}}`},
		{name: "vllm style", body: NewEngineError(400, "input_tokens", "too long"),
			want: `{"error":{"message":"too long","type":"BadRequestError","param":"input_tokens","code":400}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(tt.body.Marshal()); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
