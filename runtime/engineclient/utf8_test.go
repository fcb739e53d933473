package engineclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// utf8Engine sends one content chunk whose text is not valid UTF-8.
func utf8Engine(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\xff\xfeb\xe2\x82\"}}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDirectReplacesInvalidUTF8: an engine's bytes that are not UTF-8
// reach the client as U+FFFD, as the node agent sends them, not as they
// came: a strict client's JSON parser refuses them.
func TestDirectReplacesInvalidUTF8(t *testing.T) {
	srv := utf8Engine(t)
	d := NewDirect(map[string][]Target{"m": {{URL: srv.URL, ServedName: "m"}}}, srv.Client())
	s, err := d.Dispatch(context.Background(), job("m", true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	events, end := drain(t, s)
	if !errors.Is(end, io.EOF) || len(events) != 1 {
		t.Fatalf("%d events, end %v; want 1 and io.EOF", len(events), end)
	}
	got := string(events[0].Data)
	want := `{"choices":[{"delta":{"content":"a` + "\uFFFD" + `b` + "\uFFFD" + `"}}]}`
	if !utf8.ValidString(got) || got != want || events[0].Tokens != 1 {
		t.Errorf("event %q (tokens %d), want %q (tokens 1)", got, events[0].Tokens, want)
	}
}

func TestAppendValidUTF8(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"héllo \uFFFD", "héllo \uFFFD"},
		{"a\x80b", "a\uFFFDb"},
		{"a\xff\xfe\xfdb", "a\uFFFDb"},
		{"\xe2\x82", "\uFFFD"},
		{"\xed\xa0\x80x", "\uFFFDx"}, // a surrogate's encoding
	} {
		got := AppendValidUTF8([]byte("pre:"), []byte(tc.in))
		if string(got) != "pre:"+tc.want {
			t.Errorf("AppendValidUTF8(%q) = %q, want %q", tc.in, got, "pre:"+tc.want)
		}
	}
}

// FuzzAppendValidUTF8: the result is valid UTF-8, what bytes.ToValidUTF8
// gives (the node agent's rule), and valid input passes unchanged.
func FuzzAppendValidUTF8(f *testing.F) {
	f.Add([]byte("a\xffb\xe2\x82\xacc\xe2\x82"))
	f.Fuzz(func(t *testing.T, in []byte) {
		got := AppendValidUTF8(nil, in)
		want := strings.ToValidUTF8(string(in), "\uFFFD")
		if !utf8.Valid(got) || string(got) != want {
			t.Fatalf("AppendValidUTF8(%q) = %q, want %q", in, got, want)
		}
	})
}
