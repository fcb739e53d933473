package auth

import (
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/credential"
)

func TestStaticAdminToken(t *testing.T) {
	tok, err := GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, AdminTokenPrefix) || credential.LooksLikeKey(tok) {
		t.Fatalf("generated token %q: want the admin prefix and not an api key shape", tok)
	}
	admin, err := NewStaticAdminToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		token string
		want  bool
	}{
		{name: "same", token: tok, want: true},
		{name: "last char changed", token: tok[:len(tok)-1] + "!", want: false},
		{name: "prefix only", token: tok[:len(tok)-1], want: false},
		{name: "longer", token: tok + "x", want: false},
		{name: "empty", token: "", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := admin.Match(tt.token); got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
		})
	}
	p := admin.Principal()
	if p.Role != RoleAdmin || p.TeamID != 0 || p.KeyID != 0 || p.Kind != KindAdminToken {
		t.Errorf("Principal = %+v, want an admin with no team or key", p)
	}
}

func TestNewStaticAdminTokenRejects(t *testing.T) {
	k, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		token string
	}{
		{name: "short", token: "changeme"},
		{name: "api key shape", token: k.Secret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewStaticAdminToken(tt.token); err == nil {
				t.Error("NewStaticAdminToken succeeded, want an error")
			}
		})
	}
}
