package auth

import (
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }

// newFakeClock returns a clock that moves only when a test steps it.
func newFakeClock() *testingclock.FakeClock {
	return testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

// echoWindow is the length of the credential fragments that must never
// appear in an error message or a log line.
const echoWindow = 10

// assertNoEcho fails t if text contains any echoWindow-long fragment of
// credential.
func assertNoEcho(t *testing.T, text, credential string) {
	t.Helper()
	for i := 0; i+echoWindow <= len(credential); i++ {
		if frag := credential[i : i+echoWindow]; strings.Contains(text, frag) {
			t.Fatalf("%q contains the credential fragment %q", text, frag)
		}
	}
}
