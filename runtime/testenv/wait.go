package testenv

import (
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

// Eventually waits until cond holds, checking it every pollEvery, and
// fails tb if it does not within WaitFor; what names the condition.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	EventuallyWithin(tb, WaitFor, what, cond)
}

// EventuallyWithin is Eventually with its own deadline.
func EventuallyWithin(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(pollEvery)
	}
}
