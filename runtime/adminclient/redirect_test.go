package adminclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestClientRefusesRedirects: an answer that redirects elsewhere — here to
// another port of the same host, where Go's client would send the
// Authorization header along — is refused at once with an error that
// says so, not retried, and the other listener never sees the admin token.
func TestClientRefusesRedirects(t *testing.T) {
	var (
		mu       sync.Mutex
		reached  int
		leaked   []string
		redirect int
	)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached++
		if a := r.Header.Get("Authorization"); a != "" {
			leaked = append(leaked, a)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
	}))
	t.Cleanup(other.Close)
	if !strings.HasPrefix(other.URL, "http://127.0.0.1:") {
		t.Fatalf("the other listener is at %s, want another port of 127.0.0.1", other.URL)
	}
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			c, _ := scriptedClient(t, &scriptedServer{script: []func(http.ResponseWriter, *http.Request){
				func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					redirect++
					mu.Unlock()
					http.Redirect(w, r, other.URL+r.URL.Path, status)
				},
			}})
			_, err := c.ListTeams(context.Background())
			if !errors.Is(err, ErrRedirect) {
				t.Fatalf("ListTeams through a %d: %v, want ErrRedirect", status, err)
			}
			if !strings.Contains(err.Error(), "redirect") || strings.Contains(err.Error(), "test-token") {
				t.Errorf("error %q: want it to name the refused redirect and not the token", err)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if reached != 0 || len(leaked) != 0 {
		t.Errorf("the redirect target got %d requests, %d with an Authorization header; want none", reached, len(leaked))
	}
	if redirect != 4 {
		t.Errorf("the redirecting server got %d requests for 4 calls: a refused redirect must not be retried", redirect)
	}
}
