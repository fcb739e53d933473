package credential

import (
	"bytes"
	"testing"
)

func TestGenerateKey(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		k, err := GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		if !LooksLikeKey(k.Secret) {
			t.Fatalf("key %q does not look like a key", k.Secret)
		}
		if seen[k.Secret] {
			t.Fatal("duplicate key")
		}
		seen[k.Secret] = true
		if !bytes.Equal(k.Hash, HashKey(k.Secret)) {
			t.Fatal("hash does not match the secret")
		}
		if bytes.Contains(k.Hash, []byte(k.Secret)) || len(k.Hash) != 32 {
			t.Fatal("hash must be a 32-byte digest, not the secret")
		}
		if k.Display != k.Secret[:12] {
			t.Fatalf("display = %q, want the first 12 characters", k.Display)
		}
	}
}

func TestLooksLikeKey(t *testing.T) {
	k, _ := GenerateKey()
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{name: "generated", in: k.Secret, want: true},
		{name: "jwt", in: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.sig", want: false},
		{name: "short", in: "llp_abc", want: false},
		{name: "bad char", in: k.Secret[:len(k.Secret)-1] + "-", want: false},
		{name: "no prefix", in: "sk_" + k.Secret[4:], want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LooksLikeKey(tt.in); got != tt.want {
				t.Errorf("LooksLikeKey(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
