package gateway

import (
	"testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestMain checks, after the package's tests, that none left a goroutine
// running.
func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }
