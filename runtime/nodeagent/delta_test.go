package nodeagent

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestValidDelta(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"valid", []byte(`{"choices":[{"delta":{"content":"héllo"}}]}`), `{"choices":[{"delta":{"content":"héllo"}}]}`},
		{"lone continuation byte", []byte("{\"choices\":[{\"delta\":{\"content\":\"a\x80b\"}}]}"), `{"choices":[{"delta":{"content":"a` + "\uFFFD" + `b"}}]}`},
		{"truncated sequence", []byte("{\"c\":\"\xe2\x82\"}"), `{"c":"` + "\uFFFD" + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := validDelta(tt.in)
			if !utf8.Valid(got) || string(got) != tt.want {
				t.Errorf("validDelta(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("validDelta(%q) = %q is not JSON", tt.in, got)
			}
			if len(tt.in) > 0 && &got[0] == &tt.in[0] {
				t.Error("validDelta returned the engine's buffer, which the next Recv reuses")
			}
		})
	}
}
