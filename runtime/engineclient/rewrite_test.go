package engineclient

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/llmplat/llmplat/runtime/jsonscan"
	"github.com/llmplat/llmplat/runtime/jsonvariant"
)

// rewriteChunk is what the gateway shows a client of an engine's chunk:
// the spans the one parse located, edited (dispatch.Event.Rewrite).
func rewriteChunk(chunk, quoted, usage []byte, strip bool) []byte {
	ev := ParseEvent(chunk)
	return ev.Rewrite(quoted, usage, strip)
}

// renameModel and stripUsage are rewriteChunk's two edits apart.
func renameModel(chunk, quoted []byte) []byte { return rewriteChunk(chunk, quoted, nil, false) }
func stripUsage(chunk []byte) []byte          { return rewriteChunk(chunk, nil, nil, true) }

func TestRenameModel(t *testing.T) {
	quoted, _ := json.Marshal("llama-8b")
	tests := []struct{ name, in, want string }{
		{"served name", `{"id":"c1","model":"sim-8b","choices":[]}`, `{"id":"c1","model":"llama-8b","choices":[]}`},
		{"path-like served name", `{"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"delta":{"content":"hi"}}]}`, `{"model":"llama-8b","choices":[{"delta":{"content":"hi"}}]}`},
		{"escaped quote in the served name", `{"model":"odd\"name","x":1}`, `{"model":"llama-8b","x":1}`},
		{"space after the colon", `{"model": "sim-8b"}`, `{"model": "llama-8b"}`},
		{"already the platform name", `{"model":"llama-8b"}`, `{"model":"llama-8b"}`},
		{"no model member", `{"choices":[]}`, `{"choices":[]}`},
		{"content mentioning model", `{"choices":[{"delta":{"content":"\"model\":\"x\""}}],"model":"sim-8b"}`, `{"choices":[{"delta":{"content":"\"model\":\"x\""}}],"model":"llama-8b"}`},
		{"truncated", `{"model":"sim-8b`, `{"model":"sim-8b`},
		{"not a string", `{"model":null}`, `{"model":null}`},
		{"space before the colon", `{"model" : "sim-8b"}`, `{"model" : "llama-8b"}`},
		{"indented", "{\n  \"id\": \"c1\",\n  \"model\":\n    \"sim-8b\"\n}", "{\n  \"id\": \"c1\",\n  \"model\":\n    \"llama-8b\"\n}"},
		{"a nested model first", `{"choices":[{"delta":{"model":"x"}}],"model":"sim-8b"}`, `{"choices":[{"delta":{"model":"x"}}],"model":"llama-8b"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(renameModel([]byte(tt.in), quoted)); got != tt.want {
				t.Errorf("renameModel(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestStripUsage(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"usage last", `{"id":"c","choices":[{"delta":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
			`{"id":"c","choices":[{"delta":{"content":"hi"}}]}`},
		{"usage first", `{"usage":{"prompt_tokens":3,"completion_tokens":1},"choices":[]}`, `{"choices":[]}`},
		{"nested details", `{"choices":[],"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens":1}}`, `{"choices":[]}`},
		{"spaces", `{"choices": [], "usage": {"prompt_tokens": 3}}`, `{"choices": []}`},
		{"no usage", `{"choices":[]}`, `{"choices":[]}`},
		{"usage null", `{"choices":[],"usage":null}`, `{"choices":[],"usage":null}`},
		{"python", `{"id": "c", "choices": [{"delta": {"content": "hi"}}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}`,
			`{"id": "c", "choices": [{"delta": {"content": "hi"}}]}`},
		{"space before the colon", `{"choices":[],"usage" : {"prompt_tokens":3}}`, `{"choices":[]}`},
		{"indented", "{\n  \"usage\": {\n    \"prompt_tokens\": 3\n  },\n  \"choices\": []\n}", "{\n  \"choices\": []\n}"},
		{"only usage", `{"usage":{"prompt_tokens":3}}`, `{}`},
		{"a nested usage first", `{"choices":[{"delta":{"usage":{"x":1}}}],"usage":{"prompt_tokens":3}}`, `{"choices":[{"delta":{"usage":{"x":1}}}]}`},
		{"not JSON", `{"choices":[],"usage":{"prompt_tokens":3}`, `{"choices":[],"usage":{"prompt_tokens":3}`},
		{"content mentions usage", `{"choices":[{"delta":{"content":"\"usage\":{}"}}],"usage":{"prompt_tokens":1}}`, `{"choices":[{"delta":{"content":"\"usage\":{}"}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(stripUsage([]byte(tt.in)))
			if got != tt.want {
				t.Errorf("stripUsage(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzRewriteChunk: what the client reads of a rewritten chunk is the
// engine's chunk with its model renamed and its usage object replaced
// (the usage billed) or, when stripped, gone; however the engine spelled
// it.
func FuzzRewriteChunk(f *testing.F) {
	for _, e := range commonEvents {
		f.Add([]byte(e), true, false)
		f.Add([]byte(e), false, true)
	}
	f.Add([]byte(`{"id": "c", "model": "sim-8b", "choices": [], "usage": {"prompt_tokens": 3}}`), true, false)
	f.Add([]byte(`{"usage" : {"prompt_tokens": 3} , "model": "sim-8b", "choices": []}`), false, true)
	f.Add([]byte(`{"usage":{"prompt_tokens":3},"model":null}`), true, false)
	quoted := []byte(`"llama-8b"`)
	billed := []byte(`{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}`)
	f.Fuzz(func(t *testing.T, chunk []byte, strip, replace bool) {
		var in map[string]any
		if json.Unmarshal(chunk, &in) != nil || in == nil || !plainDistinctKeys(chunk) || ParseEvent(chunk).Duplicate || ParseEvent(chunk).Err != nil {
			return
		}
		var usage []byte
		if u, ok := in["usage"].(map[string]any); ok && u != nil {
			switch {
			case replace:
				in["usage"] = map[string]any{"prompt_tokens": 12.0, "completion_tokens": 3.0, "total_tokens": 15.0}
			case strip:
				delete(in, "usage")
			}
		}
		if replace {
			usage = billed
		}
		if _, ok := in["model"].(string); ok {
			in["model"] = "llama-8b"
		}
		for _, v := range append([]jsonvariant.Variant{{Name: "as sent", Data: chunk}}, jsonvariant.Of(chunk)...) {
			out := rewriteChunk(v.Data, quoted, usage, strip)
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(got, in) {
				t.Fatalf("rewriteChunk(%s %s, strip %v, usage %s) = %s, reads %v (%v), want %v", v.Name, v.Data, strip, usage, out, got, err, in)
			}
		}
	})
}

// plainDistinctKeys reports whether an object's top-level keys are
// written without escapes and differ: a key with escapes is left as it
// came, and of two equal keys a decode keeps the last.
func plainDistinctKeys(obj []byte) bool {
	seen := map[string]bool{}
	o := jsonscan.Members(obj)
	for k, _, more := o.Next(); more; k, _, more = o.Next() {
		if !jsonscan.Plain(k) || seen[string(k)] {
			return false
		}
		seen[string(k)] = true
	}
	return !o.Malformed()
}

// TestRewriteLeavesADuplicateAlone: an event with a repeated key is one
// the gateway ends the stream at; nothing in it is located to edit.
func TestRewriteLeavesADuplicateAlone(t *testing.T) {
	for _, in := range []string{
		`{"id":"c","usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2},"choices":[]}`,
		`{"model":"a","choices":[{"delta":{"content":"x","content":"y"}}],"usage":{"prompt_tokens":1}}`,
	} {
		ev := ParseEvent([]byte(in))
		if !ev.Duplicate {
			t.Errorf("%s: not marked a duplicate", in)
		}
		if got := string(ev.Rewrite([]byte(`"m"`), nil, true)); got != in {
			t.Errorf("%s rewritten to %s", in, got)
		}
	}
}
