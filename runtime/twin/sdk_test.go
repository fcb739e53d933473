package twin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSDKTakesOnlyAWholeAnswer checks what the twin's SDK counts as
// served: a stream with content, a finish reason and [DONE]; an answer cut
// short (no finish reason) or with an error event fails.
func TestSDKTakesOnlyAWholeAnswer(t *testing.T) {
	const (
		content = `data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`
		stop    = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
		failure = `data: {"error":{"message":"engine gone","type":"server_error"}}`
		done    = `data: [DONE]`
	)
	for _, tc := range []struct {
		name    string
		events  []string
		wantErr string
	}{
		{"whole", []string{content, stop, done}, ""},
		{"cut short", []string{content, done}, "a stream without a finish reason"},
		{"error event", []string{content, failure, done}, "error in the stream"},
		{"no content", []string{stop, done}, "a stream without content"},
		{"no [DONE]", []string{content, stop}, "the stream ended before [DONE]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for _, e := range tc.events {
					fmt.Fprintf(w, "%s\n\n", e)
				}
			}))
			defer srv.Close()
			sdk := &SDK{c: &Cluster{Scale: 1}, URL: srv.URL, Key: "k", HTTP: srv.Client()}
			got := sdk.StreamChat(t.Context(), nil, "m", "hi", 8)
			if got.Status != http.StatusOK {
				t.Fatalf("status %d, want 200", got.Status)
			}
			if tc.wantErr == "" && got.Err != "" || !strings.Contains(got.Err, tc.wantErr) {
				t.Errorf("err %q, want %q", got.Err, tc.wantErr)
			}
		})
	}
}
