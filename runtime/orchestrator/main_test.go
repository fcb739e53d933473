package orchestrator_test

import (
	"os"
	"testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestMain(m *testing.M) {
	if raw := os.Getenv(idleAgentsEnv); raw != "" {
		os.Exit(idleAgentsMain(raw))
	}
	testenv.MainWithLeakCheck(m)
}
