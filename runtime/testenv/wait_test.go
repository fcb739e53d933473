package testenv

import (
	"fmt"
	"strings"
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

// fatalRecorder records a Fatalf's message instead of ending the test.
type fatalRecorder struct {
	testing.TB
	failed string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
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

func TestEventuallyNilReportsTheLastStateSeen(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	var calls atomic.Int32
	func() {
		defer func() {
			if r := recover(); r != nil && r != any(rec) {
				panic(r)
			}
		}()
		EventuallyNil(rec, 50*time.Millisecond, "never", func() error {
			return fmt.Errorf("check %d", calls.Add(1))
		})
	}()
	if want := fmt.Sprintf("check %d", calls.Load()); !strings.Contains(rec.failed, want) {
		t.Errorf("failure %q does not report the last state seen, %q", rec.failed, want)
	}
}

func TestEventuallyNilReturnsOnNil(t *testing.T) {
	var calls atomic.Int32
	EventuallyNil(t, WaitFor, "the third check", func() error {
		if calls.Add(1) < 3 {
			return errNotYet
		}
		return nil
	})
	if got := calls.Load(); got != 3 {
		t.Errorf("check called %d times, want 3", got)
	}
}
