package testenv

import (
	"errors"
	"testing"
	"time"
)

// Waits of the tests.
const (
	// WaitFor bounds a test's wait for a condition: generous for a loaded
	// 2-core machine, where a registration or a refresh that takes
	// milliseconds alone can take seconds.
	WaitFor = 20 * time.Second
	// pollEvery is how often a wait checks its condition: often enough
	// that a test does not idle, rarely enough not to load the machine.
	pollEvery = 20 * time.Millisecond
)

// errNotYet is a bool condition's "not yet": it says nothing more.
var errNotYet = errors.New("not yet")

// Eventually waits until cond holds, checking it every pollEvery, and
// fails tb if it does not within WaitFor; what names the condition.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	EventuallyWithin(tb, WaitFor, what, cond)
}

// EventuallyWithin is Eventually with its own deadline.
func EventuallyWithin(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	if err := poll(within, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}); err != nil {
		tb.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// EventuallyNil waits until check returns nil, checking it every
// pollEvery, and fails tb if it does not within within. check's error says
// what it saw instead; the failure reports the last one, so a test that
// times out shows the state it was stuck in.
func EventuallyNil(tb testing.TB, within time.Duration, what string, check func() error) {
	tb.Helper()
	if err := poll(within, check); err != nil {
		tb.Fatalf("timed out after %v waiting for %s; last seen: %v", within, what, err)
	}
}

// poll calls check every pollEvery until it returns nil, or until within
// has passed; it returns check's last error.
func poll(within time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pollEvery)
	}
}
