package orchestrator

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzValidText: whatever bytes a node sends, the frame read is valid
// UTF-8, a valid frame is kept as it is, and valid JSON stays valid JSON
// (invalid bytes can only sit inside its strings).
func FuzzValidText(f *testing.F) {
	for _, seed := range []string{
		`{"v":1,"type":"chunk","request_id":"r","seq":0,"delta":{"content":"héllo"}}`,
		"{\"content\":\"a\xff\xfeb\"}",
		"\xed\xa0\x80", // a surrogate's encoding
		"\xc0\xaf",     // an overlong '/'
		"\xf4\x90\x80\x80",
		"ascii only",
		"",
	} {
		f.Add([]byte(seed))
	}
	o := &Orchestrator{cfg: Config{Metrics: NewMetrics(nil)}}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		got := o.validText(in)
		if !utf8.Valid(got) {
			t.Fatalf("validText(%q) = %q, not valid UTF-8", orig, got)
		}
		if utf8.Valid(orig) && !bytes.Equal(got, orig) {
			t.Fatalf("validText changed a valid frame: %q → %q", orig, got)
		}
		if json.Valid(orig) && !json.Valid(got) {
			t.Fatalf("validText broke valid JSON: %q → %q", orig, got)
		}
	})
}
