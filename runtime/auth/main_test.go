package auth

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }

// fakeClock is a clock that moves only when a test advances it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
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
