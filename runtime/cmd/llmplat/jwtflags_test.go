package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/auth"
)

// TestJWTFlags: the limits every JWT caller gets come from flags, and
// flags that cannot take effect are refused rather than ignored.
func TestJWTFlags(t *testing.T) {
	parse := func(args ...string) (*auth.JWTConfig, error) {
		t.Helper()
		fs := newFlagSet("gateway")
		var j jwtFlags
		j.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return j.config()
	}
	cfg, err := parse("-jwks-url", "https://idp.example/jwks", "-jwt-issuer", "https://idp.example", "-jwt-audience", "llmplat",
		"-jwt-rpm", "60", "-jwt-tokens-per-day", "100000", "-jwt-max-streams", "4", "-jwt-max-tokens", "512", "-jwt-models", "llama-8b, qwen-32b")
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Limits{RPM: 60, TokensPerDay: 100000, MaxStreams: 4, MaxTokens: 512, ModelAllowlist: []string{"llama-8b", "qwen-32b"}}
	if !reflect.DeepEqual(cfg.Limits, want) || cfg.Issuer != "https://idp.example" || cfg.Audience != "llmplat" {
		t.Errorf("config = %+v, want limits %+v", cfg, want)
	}
	if cfg, err := parse(); cfg != nil || err != nil {
		t.Errorf("no flags: %+v, %v; want no JWTs", cfg, err)
	}
	for _, args := range [][]string{
		{"-jwt-rpm", "60"},
		{"-jwt-models", "llama-8b"},
		{"-jwks-url", "https://idp.example/jwks", "-jwt-max-streams", "-1"},
		{"-jwks-url", "https://idp.example/jwks", "-jwt-max-tokens", "-1"},
		{"-jwt-max-tokens", "512"},
	} {
		if _, err := parse(args...); err == nil || !strings.Contains(err.Error(), "-jwt") {
			t.Errorf("%v: err = %v, want a refusal naming the flags", args, err)
		}
	}
}
