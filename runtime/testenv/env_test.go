package testenv

import (
	"slices"
	"strings"
	"testing"
)

// TestCleanEnv: the environment a test hands a make of its own has none
// of make's variables, and everything else.
func TestCleanEnv(t *testing.T) {
	t.Setenv("MAKEFLAGS", "-j2 --jobserver-auth=fifo:/tmp/x")
	t.Setenv("MFLAGS", "-j2")
	t.Setenv("MAKELEVEL", "1")
	t.Setenv("LLMPLAT_CLEAN_ENV_TEST", "kept")
	env := CleanEnv()
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); name == "MAKEFLAGS" || name == "MFLAGS" || name == "MAKELEVEL" {
			t.Errorf("CleanEnv kept %s", kv)
		}
	}
	if !slices.Contains(env, "LLMPLAT_CLEAN_ENV_TEST=kept") {
		t.Errorf("CleanEnv dropped a variable of the test's own: %v", env)
	}
}
