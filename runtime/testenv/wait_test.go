package testenv

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	Eventually(t, "the third check", func() bool { return calls.Add(1) >= 3 })
	if got := calls.Load(); got != 3 {
		t.Errorf("condition checked %d times, want 3", got)
	}
}

// fatalRecorder records a Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	failed string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}

func TestEventuallyWithinFailsAtItsDeadline(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != any(rec) {
				panic(r)
			}
		}()
		EventuallyWithin(rec, 50*time.Millisecond, "never", func() bool { return false })
	}()
	if rec.failed == "" {
		t.Fatal("EventuallyWithin returned on a condition that never holds")
	}
}
