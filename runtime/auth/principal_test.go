package auth

import (
	"strings"
	"testing"
)

func TestPrincipalQuotaID(t *testing.T) {
	tests := []struct {
		name string
		p    Principal
		want string
	}{
		{name: "api key", p: Principal{Kind: KindAPIKey, KeyID: 42, Subject: "llp_AbC123xy"}, want: "key:42"},
		// sha256("alice") and sha256("bootstrap"), first 16 bytes.
		{name: "jwt", p: Principal{Kind: KindJWT, Subject: "alice"}, want: "jwt:2bd806c97f0e00af1a1fc3328fa763a9"},
		{name: "admin token", p: Principal{Kind: KindAdminToken, Subject: "bootstrap"}, want: "admin:333c04dd151a2a6831c039cb9a651df2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.QuotaID(); got != tt.want {
				t.Errorf("QuotaID = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPrincipalAllowsModel(t *testing.T) {
	tests := []struct {
		name      string
		allowlist []string
		model     string
		want      bool
	}{
		{name: "empty allows all", model: "llama-70b", want: true},
		{name: "listed", allowlist: []string{"llama-8b", "qwen-32b"}, model: "qwen-32b", want: true},
		{name: "not listed", allowlist: []string{"llama-8b"}, model: "llama-70b", want: false},
		{name: "case matters", allowlist: []string{"llama-8b"}, model: "LLAMA-8B", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Principal{Limits: Limits{ModelAllowlist: tt.allowlist}}
			if got := p.AllowsModel(tt.model); got != tt.want {
				t.Errorf("AllowsModel(%q) = %v, want %v", tt.model, got, tt.want)
			}
		})
	}
}

func TestRoleString(t *testing.T) {
	tests := []struct {
		role Role
		want string
	}{
		{role: RoleUser, want: "user"},
		{role: RoleAdmin, want: "admin"},
		{role: Role(9), want: "role(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.role.String(); got != tt.want {
				t.Errorf("String = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestQuotaIDOfAnySubject: an issuer's subject may hold spaces, commas and
// braces (LDAP names); its quota identity is still a usable Redis name,
// one per subject.
func TestQuotaIDOfAnySubject(t *testing.T) {
	seen := map[string]string{}
	for _, sub := range []string{"CN=Jane Doe,OU=ML", "CN=Jane Doe,OU=ml", "a{b}c", "tab\there", "alice"} {
		id := Principal{Kind: KindJWT, Subject: sub}.QuotaID()
		if strings.ContainsAny(id, "{} \t\r\n") || len(id) != len("jwt:")+32 {
			t.Errorf("QuotaID(%q) = %q: not a usable quota name", sub, id)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("subjects %q and %q share the quota id %s", sub, other, id)
		}
		seen[id] = sub
	}
}
