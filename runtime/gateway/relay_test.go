package gateway_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	oa "github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// TestUsageChunkOnlyWhenAsked: the gateway always asks the engine for usage
// (it meters with it) but relays the usage chunk only to a client that
// asked; both settle exactly.
func TestUsageChunkOnlyWhenAsked(t *testing.T) {
	s := newStack(t, stackOpts{})
	key := s.key(adminwire.CreateKeyRequest{TeamID: s.team("t", 10*credit)})
	for _, tc := range []struct {
		name      string
		body      string
		wantUsage bool
	}{
		{"not asked", `{"model":"llama-8b","stream":true,"max_tokens":6,"messages":[{"role":"user","content":"hi"}]}`, false},
		{"asked", `{"model":"llama-8b","stream":true,"stream_options":{"include_usage":true},"max_tokens":6,"messages":[{"role":"user","content":"hi"}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.post(context.Background(), s.url, key, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			r := oa.NewSSEReader(resp.Body)
			var usage, done bool
			var text strings.Builder
			for {
				data, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if oa.IsDone(data) {
					done = true
					continue
				}
				var c oa.ChatCompletionChunk
				if err := json.Unmarshal(data, &c); err != nil {
					t.Fatal(err)
				}
				if c.Usage != nil {
					usage = true
				}
				for _, ch := range c.Choices {
					if ch.Delta.Content != nil {
						text.WriteString(*ch.Delta.Content)
					}
				}
			}
			if usage != tc.wantUsage || !done {
				t.Errorf("usage chunk relayed = %v (want %v), [DONE] = %v", usage, tc.wantUsage, done)
			}
			row := s.waitRow(resp.Header.Get("X-Request-Id"))
			// The simulator's words are one token each: the text the client
			// saw counts exactly the tokens the ledger charged.
			if n := tokens.Count(text.String()); row.status != "settled" || row.from != "exact" || row.completion != n {
				t.Errorf("row = %+v, want settled exact with the %d tokens streamed", row, n)
			}
		})
	}
}

// TestTLSAtTheEdge: with a certificate and key the gateway serves HTTPS.
func TestTLSAtTheEdge(t *testing.T) {
	s := newStack(t, stackOpts{})
	certFile, keyFile, pool := selfSigned(t)
	gw, err := gateway.New(gateway.Config{Dispatcher: s.direct, Catalog: gateway.StaticCatalog{}, Auth: denyAll{}, Limits: nil, Queue: nil, Ledger: s.led,
		TLSCertFile: certFile, TLSKeyFile: keyFile})
	if err == nil {
		t.Fatal("New accepted a config without limits and queue")
	}
	_ = gw
	lim, q := s.quotas()
	gw, err = gateway.New(gateway.Config{Dispatcher: s.direct, Catalog: gateway.StaticCatalog{}, Auth: denyAll{}, Limits: lim, Queue: q, Ledger: s.led,
		TLSCertFile: certFile, TLSKeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOn(t, gw)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := client.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Errorf("status %d, TLS %v; want 200 over TLS", resp.StatusCode, resp.TLS != nil)
	}
	// No plaintext API: Go's TLS server answers plain HTTP with a 400.
	if plain, err := http.Get("http://" + addr + "/healthz"); err == nil {
		plain.Body.Close()
		if plain.StatusCode == 200 {
			t.Error("plain HTTP served the API")
		}
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and returns
// its files and a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	certPEM, keyPEM := generateCert(t)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
