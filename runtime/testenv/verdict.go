package testenv

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// envCI is set to true by CI runners; a missing service then fails the test
// instead of skipping it.
const envCI = "CI"

// verdict is what a test does about a service it asked for.
type verdict int

const (
	// verdictUse means the service is there: the test goes on.
	verdictUse verdict = iota
	// verdictSkip means the service is missing outside CI: the test is skipped.
	verdictSkip
	// verdictFail means the service is missing under CI: the test fails.
	verdictFail
)

// String returns the verdict's name, for test failure messages.
func (v verdict) String() string {
	switch v {
	case verdictUse:
		return "use"
	case verdictSkip:
		return "skip"
	case verdictFail:
		return "fail"
	default:
		return "verdict(" + strconv.Itoa(int(v)) + ")"
	}
}

// decide returns what a test does given the value of the CI variable and
// whether the service it needs is available. CI counts as set when the value
// parses as a true boolean ("true", "1", "TRUE"...).
func decide(ci string, available bool) verdict {
	if available {
		return verdictUse
	}
	if on, err := strconv.ParseBool(ci); err == nil && on {
		return verdictFail
	}
	return verdictSkip
}

// missingError says that a service cannot be had on this machine and what to
// do about it. It is the only error that may turn into a skip.
type missingError struct {
	service string // "PostgreSQL" or "Redis"
	why     string // what is missing
	hint    string // how to install it or where to point the harness instead
}

// Error returns the full message shown to the test.
func (e *missingError) Error() string {
	return fmt.Sprintf("%s is not available: %s; %s", e.service, e.why, e.hint)
}

// reportMissing skips or fails tb for a missing service, following decide.
func reportMissing(tb testing.TB, m *missingError) {
	tb.Helper()
	switch decide(os.Getenv(envCI), false) {
	case verdictFail:
		tb.Fatalf("testenv: %v (%s=true: a missing service fails the test)", m, envCI)
	default:
		tb.Skipf("testenv: %v", m)
	}
}

// Missing skips tb, or fails it under CI, because a service it needs
// cannot be had: why says what is missing and hint how to get it. It is
// for harnesses of other services (the Kubernetes API server) that follow
// the same rule as PostgreSQL and Redis.
func Missing(tb testing.TB, service, why, hint string) {
	tb.Helper()
	reportMissing(tb, &missingError{service: service, why: why, hint: hint})
}
