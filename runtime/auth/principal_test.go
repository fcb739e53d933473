package auth

import "testing"

func TestPrincipalQuotaID(t *testing.T) {
	tests := []struct {
		name string
		p    Principal
		want string
	}{
		{name: "api key", p: Principal{Kind: KindAPIKey, KeyID: 42, Subject: "llp_AbC123xy"}, want: "key:42"},
		{name: "jwt", p: Principal{Kind: KindJWT, Subject: "alice"}, want: "jwt:alice"},
		{name: "admin token", p: Principal{Kind: KindAdminToken, Subject: "bootstrap"}, want: "admin:bootstrap"},
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
