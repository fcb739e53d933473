package urlguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// allocated returns the bytes one call of f allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxBytesPerByte bounds what CheckJSON allocates per byte of a body: it
// reads the body in place, decoding only strings that may be URLs.
const maxBytesPerByte = 4

// TestCheckJSONMemoryIsLinear: a long key above many values, or above
// many URLs, costs memory linear in the body. A path string built for
// every value below the key cost its length each time: a 64 KiB key above
// 8000 zeros, an 81 KB body, allocated 1.8 GB.
func TestCheckJSONMemoryIsLinear(t *testing.T) {
	key := strings.Repeat("k", 64<<10)
	tests := []struct {
		name, body string
		path       string // of the refusal, "" when accepted
	}{
		{"long key above many values", `{"` + key + `":[0` + strings.Repeat(",0", 8000) + `],"x":"a:b"}`, ""},
		{"long key above many urls", `{"` + key + `":["http://a.example"` + strings.Repeat(`,"http://a.example"`, 4*MaxURLs) + `]}`,
			key + "[64]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Guard{Resolver: resolver}
			var err error
			body := []byte(tt.body)
			got := allocated(func() { err = g.CheckJSON(context.Background(), body) })
			var be *BlockedError
			switch {
			case tt.path == "" && err != nil:
				t.Errorf("CheckJSON = %v, want nil", err)
			case tt.path != "" && (!errors.As(err, &be) || be.Path != tt.path):
				t.Errorf("CheckJSON = %v, want a refusal at the %d-th URL", err, MaxURLs+1)
			}
			t.Logf("%d bytes allocated for a %d-byte body", got, len(tt.body))
			if limit := uint64(maxBytesPerByte*len(tt.body) + 64<<10); got > limit {
				t.Errorf("CheckJSON allocated %d bytes for a %d-byte body, want at most %d", got, len(tt.body), limit)
			}
		})
	}
}

// refCollect is collect by a decode into interfaces, as it was: the
// reference for FuzzCollect.
func refCollect(body []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return nil
	}
	var out []string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch t := v.(type) {
		case map[string]any:
			for k, c := range t {
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(c, p)
			}
		case []any:
			for i, c := range t {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		case string:
			if looksLikeURL(t) {
				out = append(out, path+" "+t)
			}
		}
	}
	walk(doc, "")
	return out
}

// FuzzCollect: the in-place walk finds every URL a decode finds, at the
// same path (and those under a duplicate key the decode drops).
func FuzzCollect(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/"}}]}]}`,
		`{"a\u002eb":["x",{"u":"http\u003a//127.0.0.1/"}],"":{"":"ws://x"}}`,
		`"http://a"`, `[[],[{}],["https://b", 1e5, true, null, {"k:":"ftp://c"}]]`,
		`{"a":"http://x","a":"http://y"}`, "{\"\xff\":\"http://\xfe\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		want := refCollect(body)
		if len(want) > MaxURLs {
			return
		}
		var got []string
		for _, u := range collect(body) {
			got = append(got, u.path()+" "+u.value)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Fatalf("collect(%q) = %q, missing %q", body, got, w)
			}
		}
	})
}
