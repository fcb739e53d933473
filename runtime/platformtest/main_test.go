package platformtest_test

import (
	"testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }
