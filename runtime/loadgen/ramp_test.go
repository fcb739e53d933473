package loadgen

import (
	"fmt"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestRamp: a ramp holds back all but one place at its start, gives the
// others back over its duration, and stops when told.
func TestRamp(t *testing.T) {
	free := func(slots chan struct{}) int {
		n := 0
		for {
			select {
			case slots <- struct{}{}:
				n++
			default:
				for range n {
					<-slots
				}
				return n
			}
		}
	}
	t.Run("held at the start", func(t *testing.T) {
		slots := make(chan struct{}, 4)
		stop := ramp(slots, time.Hour)
		defer stop()
		if got := free(slots); got != 1 {
			t.Fatalf("%d places free at the start of a ramp, want 1", got)
		}
	})
	t.Run("given back over the ramp", func(t *testing.T) {
		slots := make(chan struct{}, 4)
		stop := ramp(slots, 30*time.Millisecond)
		defer stop()
		testenv.EventuallyNil(t, 10*time.Second, "every place given back", func() error {
			if got := free(slots); got != 4 {
				return fmt.Errorf("%d places free, want 4", got)
			}
			return nil
		})
	})
	t.Run("no ramp", func(t *testing.T) {
		slots := make(chan struct{}, 4)
		ramp(slots, 0)()
		if got := free(slots); got != 4 {
			t.Fatalf("%d places free without a ramp, want 4", got)
		}
	})
}
