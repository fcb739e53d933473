package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/openai"
)

// TestResponsesDecode: a Responses body becomes the chat completion the
// engine runs — instructions first, items as messages, consecutive
// function calls as one assistant message, their outputs as tool
// messages, function tools and tool_choice in the chat shape.
func TestResponsesDecode(t *testing.T) {
	tests := []struct {
		name, body string
		// messages, tools, toolChoice and responseFormat are the chat
		// request's, encoded.
		messages, tools, toolChoice, responseFormat string
		maxOutput                                   int64
	}{
		{name: "string input with instructions",
			body:     `{"model":"m","instructions":"Be brief.","input":"Say hello","max_output_tokens":7}`,
			messages: `[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello"}]`, maxOutput: 7},
		{name: "message items and parts",
			body: `{"model":"m","input":[{"type":"message","role":"developer","content":"Rules."},` +
				`{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},` +
				`{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"c","annotations":[]}]}]}`,
			messages: `[{"role":"developer","content":"Rules."},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},` +
				`{"role":"assistant","content":[{"type":"text","text":"c"}]}]`},
		{name: "function calls and their output",
			body: `{"model":"m","input":[{"role":"user","content":"weather?"},` +
				`{"type":"function_call","call_id":"c1","name":"w","arguments":"{\"city\":\"Paris\"}"},` +
				`{"type":"function_call","call_id":"c2","name":"w","arguments":"{}"},` +
				`{"type":"function_call_output","call_id":"c1","output":"sunny"},{"type":"function_call_output","call_id":"c2","output":"rain"}],` +
				`"tools":[{"type":"function","name":"w","description":"weather","parameters":{"type":"object"},"strict":true}],` +
				`"tool_choice":{"type":"function","name":"w"}}`,
			messages: `[{"role":"user","content":"weather?"},{"role":"assistant","tool_calls":[` +
				`{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Paris\"}"}},` +
				`{"id":"c2","type":"function","function":{"name":"w","arguments":"{}"}}]},` +
				`{"role":"tool","content":"sunny","tool_call_id":"c1"},{"role":"tool","content":"rain","tool_call_id":"c2"}]`,
			tools:      `[{"type":"function","function":{"name":"w","description":"weather","parameters":{"type":"object"},"strict":true}}]`,
			toolChoice: `{"type":"function","function":{"name":"w"}}`},
		{name: "stateless fields at their defaults",
			body:     `{"model":"m","input":"hi","store":false,"previous_response_id":null,"truncation":"disabled","metadata":{"k":"v"},"tool_choice":"auto"}`,
			messages: `[{"role":"user","content":"hi"}]`, toolChoice: `"auto"`},
		{name: "plain text output",
			body:     `{"model":"m","input":"hi","text":{"format":{"type":"text"}}}`,
			messages: `[{"role":"user","content":"hi"}]`},
		{name: "json schema output",
			body:     `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"},"strict":true}}}`,
			messages: `[{"role":"user","content":"hi"}]`, responseFormat: `{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"},"strict":true}}`},
		{name: "json object output",
			body:     `{"model":"m","input":"hi","text":{"format":{"type":"json_object"}}}`,
			messages: `[{"role":"user","content":"hi"}]`, responseFormat: `{"type":"json_object"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, e, err := (&responsesAPI{}).decode([]byte(tt.body), nil)
			if err != nil || e != nil {
				t.Fatalf("refused: %v %+v", err, e)
			}
			msgs, _ := json.Marshal(req.Messages)
			if string(msgs) != tt.messages || string(req.Tools) != tt.tools || string(req.ToolChoice) != tt.toolChoice ||
				string(req.ResponseFormat) != tt.responseFormat || req.MaxOutputTokens() != tt.maxOutput {
				t.Errorf("messages %s tools %s tool_choice %s response_format %s max %d,\nwant %s tools %s tool_choice %s response_format %s max %d",
					msgs, req.Tools, req.ToolChoice, req.ResponseFormat, req.MaxOutputTokens(),
					tt.messages, tt.tools, tt.toolChoice, tt.responseFormat, tt.maxOutput)
			}
		})
	}
}

// TestResponsesDecodeRefuses: what the platform cannot honour is refused
// with the param that names it, never ignored.
func TestResponsesDecodeRefuses(t *testing.T) {
	tests := []struct {
		name, body, code, param string
	}{
		{"store", `{"model":"m","input":"hi","store":true}`, "unsupported_parameter", "store"},
		{"previous response", `{"model":"m","input":"hi","previous_response_id":"resp_1"}`, "unsupported_parameter", "previous_response_id"},
		{"unknown field", `{"model":"m","input":"hi","reasoning":{"effort":"low"}}`, "unsupported_parameter", "reasoning"},
		{"unknown item field", `{"model":"m","input":[{"role":"user","content":"hi","phase":"x"}]}`, "unsupported_parameter", "input[0].phase"},
		{"unknown item type", `{"model":"m","input":[{"type":"reasoning","id":"r"}]}`, "unsupported_parameter", "input[0].type"},
		{"image part", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/y.png"}]}]}`,
			"unsupported_parameter", "input[0].content[0].image_url"},
		{"image part type", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image"}]}]}`,
			"unsupported_parameter", "input[0].content[0].type"},
		{"hosted tool", `{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "unsupported_parameter", "tools[0].type"},
		{"grammar output", `{"model":"m","input":"hi","text":{"format":{"type":"grammar"}}}`, "unsupported_parameter", "text.format.type"},
		{"schema without name", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","schema":{}}}}`, "invalid_value", "text.format"},
		{"truncation auto", `{"model":"m","input":"hi","truncation":"auto"}`, "unsupported_parameter", "truncation"},
		{"duplicate key", `{"model":"m","input":"hi","input":"ho"}`, "duplicate_key", "input"},
		{"duplicate key in an item", `{"model":"m","input":[{"role":"user","role":"system","content":"hi"}]}`, "duplicate_key", "input[0].role"},
		{"variant key", `{"model":"m","Input":"hi"}`, "variant_key", "input"},
		{"no input", `{"model":"m"}`, "invalid_value", "input"},
		{"input a number", `{"model":"m","input":3}`, "invalid_type", "input"},
		{"unknown role", `{"model":"m","input":[{"role":"robot","content":"hi"}]}`, "invalid_value", "input[0].role"},
		{"output not a string", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[]}]}`, "invalid_value", "input[0]"},
		{"no model", `{"input":"hi"}`, "invalid_value", "model"},
		{"max output zero", `{"model":"m","input":"hi","max_output_tokens":0}`, "invalid_value", "max_output_tokens"},
		{"too large", `{"model":"m","input":"` + strings.Repeat("a", MaxSlowBodyBytes) + `"}`, "request_too_large", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, e, err := (&responsesAPI{}).decode([]byte(tt.body), nil)
			if err != nil || e == nil {
				t.Fatalf("accepted (err %v)", err)
			}
			var code string
			_ = json.Unmarshal(e.Error.Code, &code)
			param := ""
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if e.Error.Type != openai.TypeInvalidRequest || code != tt.code || param != tt.param {
				t.Errorf("got %s %s param %q (%s), want %s param %q", e.Error.Type, code, param, e.Error.Message, tt.code, tt.param)
			}
		})
	}
}
