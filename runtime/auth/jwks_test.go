package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// testKeys are generated once per test process: RSA generation is slow
// under the race detector.
var testKeys = sync.OnceValue(func() (k struct {
	rsaA, rsaB *rsa.PrivateKey
	ecA, ecB   *ecdsa.PrivateKey
}) {
	var err error
	for _, p := range []**rsa.PrivateKey{&k.rsaA, &k.rsaB} {
		if *p, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	}
	for _, p := range []**ecdsa.PrivateKey{&k.ecA, &k.ecB} {
		if *p, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
	}
	return k
})

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// rsaJWK is the JWK of pub under kid; alg may be empty.
func rsaJWK(kid, alg string, pub *rsa.PublicKey) map[string]string {
	m := map[string]string{"kty": "RSA", "kid": kid, "use": "sig",
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())}
	if alg != "" {
		m["alg"] = alg
	}
	return m
}

// ecJWK is the JWK of a P-256 pub under kid.
func ecJWK(kid string, pub *ecdsa.PublicKey) map[string]string {
	b, err := pub.Bytes() // 0x04 || x || y
	if err != nil {
		panic(err)
	}
	return map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "alg": "ES256",
		"x": b64(b[1:33]), "y": b64(b[33:])}
}

func jwksDoc(keys ...map[string]string) []byte {
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		panic(err)
	}
	return b
}

// jwksServer is an issuer's JWKS endpoint over TLS that counts fetches and
// can fail, stall or change its keys.
type jwksServer struct {
	srv  *httptest.Server
	hits atomic.Int64

	mu   sync.Mutex
	doc  []byte
	fail bool
	gate chan struct{} // while not nil, responses wait for it to close
}

func newJWKSServer(t *testing.T, keys ...map[string]string) *jwksServer {
	t.Helper()
	s := &jwksServer{doc: jwksDoc(keys...)}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		doc, fail, gate := s.doc, s.fail, s.gate
		s.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if fail {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *jwksServer) URL() string { return s.srv.URL + "/.well-known/jwks.json" }

func (s *jwksServer) setKeys(keys ...map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc = jwksDoc(keys...)
}

func (s *jwksServer) setFail(fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = fail
}

func (s *jwksServer) hold() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	return sync.OnceFunc(func() {
		s.mu.Lock()
		s.gate = nil
		s.mu.Unlock()
		close(gate)
	})
}

func TestParseJWKS(t *testing.T) {
	k := testKeys()
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	offCurve := ecJWK("off", &k.ecA.PublicKey)
	offCurve["y"] = offCurve["x"]
	encKey := rsaJWK("enc", "", &k.rsaA.PublicKey)
	encKey["use"] = "enc"
	p384Key := map[string]string{"kty": "EC", "kid": "p384", "crv": "P-384", "x": b64(p384.X.Bytes()), "y": b64(p384.Y.Bytes())}
	tests := []struct {
		name     string
		doc      []byte
		wantKids []string
		wantErr  bool
	}{
		{name: "rsa and ec", doc: jwksDoc(rsaJWK("r", "RS256", &k.rsaA.PublicKey), ecJWK("e", &k.ecA.PublicKey)), wantKids: []string{"r", "e"}},
		{name: "rsa without alg", doc: jwksDoc(rsaJWK("r", "", &k.rsaA.PublicKey)), wantKids: []string{"r"}},
		{name: "skips encryption keys", doc: jwksDoc(encKey, rsaJWK("r", "", &k.rsaA.PublicKey)), wantKids: []string{"r"}},
		{name: "skips short rsa", doc: jwksDoc(rsaJWK("small", "", &small.PublicKey), ecJWK("e", &k.ecA.PublicKey)), wantKids: []string{"e"}},
		{name: "skips other rsa algs", doc: jwksDoc(rsaJWK("r512", "RS512", &k.rsaA.PublicKey), ecJWK("e", &k.ecA.PublicKey)), wantKids: []string{"e"}},
		{name: "skips points off the curve", doc: jwksDoc(offCurve, ecJWK("e", &k.ecB.PublicKey)), wantKids: []string{"e"}},
		{name: "skips P-384", doc: jwksDoc(p384Key, ecJWK("e", &k.ecB.PublicKey)), wantKids: []string{"e"}},
		{name: "skips symmetric keys", doc: jwksDoc(map[string]string{"kty": "oct", "kid": "hs", "k": b64([]byte("secret"))}, ecJWK("e", &k.ecB.PublicKey)), wantKids: []string{"e"}},
		{name: "skips keys without kid", doc: jwksDoc(rsaJWK("", "", &k.rsaA.PublicKey), ecJWK("e", &k.ecB.PublicKey)), wantKids: []string{"e"}},
		{name: "no usable key", doc: jwksDoc(encKey), wantErr: true},
		{name: "empty", doc: []byte(`{"keys":[]}`), wantErr: true},
		{name: "not json", doc: []byte(`<html>`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseJWKS(tt.doc)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseJWKS = %d keys, want an error", len(got))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.wantKids) {
				t.Errorf("parseJWKS = %d keys, want %v", len(got), tt.wantKids)
			}
			for _, kid := range tt.wantKids {
				if _, ok := got[kid]; !ok {
					t.Errorf("key %q missing", kid)
				}
			}
		})
	}
}

func TestParseJWKSDuplicateKidFirstWins(t *testing.T) {
	k := testKeys()
	got, err := parseJWKS(jwksDoc(rsaJWK("x", "", &k.rsaA.PublicKey), rsaJWK("x", "", &k.rsaB.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if pub, ok := got["x"].key.(*rsa.PublicKey); !ok || !pub.Equal(&k.rsaA.PublicKey) {
		t.Error("kid x does not hold the first key")
	}
}

func TestCheckJWKSURL(t *testing.T) {
	tests := []struct {
		url    string
		wantOK bool
	}{
		{url: "https://issuer.example/jwks", wantOK: true},
		{url: "http://127.0.0.1:8080/jwks", wantOK: true},
		{url: "http://localhost/jwks", wantOK: true},
		{url: "http://[::1]/jwks", wantOK: true},
		{url: "http://issuer.example/jwks", wantOK: false},
		{url: "ftp://issuer.example/jwks", wantOK: false},
		{url: "/jwks", wantOK: false},
		{url: "", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			if got := checkJWKSURL(tt.url) == nil; got != tt.wantOK {
				t.Errorf("checkJWKSURL(%q) ok = %v, want %v", tt.url, got, tt.wantOK)
			}
		})
	}
}
