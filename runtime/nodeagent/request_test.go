package nodeagent

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestStreamingBody(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" means an error
	}{
		{"gateway form kept", `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{"stream turned on", `{"model":"m"}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{"other options kept", `{"stream":false,"stream_options":{"x":1}}`,
			`{"stream":true,"stream_options":{"include_usage":true,"x":1}}`},
		{"null options", `{"stream_options":null}`,
			`{"stream":true,"stream_options":{"include_usage":true}}`},
		{"null body", `null`, ""},
		{"array body", `[]`, ""},
		{"string body", `"x"`, ""},
		{"options not an object", `{"stream_options":"x"}`, ""},
		{"not JSON", `{`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := streamingBody(json.RawMessage(tt.in))
			if tt.want == "" {
				if err == nil {
					t.Fatalf("streamingBody(%s) = %s, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("streamingBody(%s): %v", tt.in, err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("streamingBody(%s) = %s, not JSON: %v", tt.in, got, err)
			}
			if err := json.Unmarshal([]byte(tt.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("streamingBody(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}
