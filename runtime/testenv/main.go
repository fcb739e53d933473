package testenv

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// mainActive is set by Main: the harness refuses to start servers that no
// one would stop.
var mainActive atomic.Bool

// closers holds what Main must undo once the tests have run, in the order
// things were set up; shutdown runs them backwards.
var closers struct {
	mu   sync.Mutex
	list []func() error
}

// atShutdown registers f to run when Main finishes.
func atShutdown(f func() error) {
	closers.mu.Lock()
	defer closers.mu.Unlock()
	closers.list = append(closers.list, f)
}

// shutdown stops every server this process started and closes the
// harness's own connections, last set up first.
func shutdown() error {
	closers.mu.Lock()
	list := closers.list
	closers.list = nil
	closers.mu.Unlock()
	var errs []error
	for i := len(list) - 1; i >= 0; i-- {
		errs = append(errs, list[i]())
	}
	return errors.Join(errs...)
}

// Main runs the tests, stops every server this process started and exits
// with the tests' code. A package's TestMain calls it (or
// MainWithLeakCheck).
func Main(m *testing.M) {
	os.Exit(run(m, nil))
}

// MainWithLeakCheck is Main followed by goleak's check for leaked
// goroutines, made after the servers and the harness's connections are
// gone, so that only the tests' own goroutines can be reported. It replaces
// goleak.VerifyTestMain, which would check too early; opts are passed to
// goleak.Find.
func MainWithLeakCheck(m *testing.M, opts ...goleak.Option) {
	os.Exit(run(m, func() error { return goleak.Find(opts...) }))
}

// run is Main's body; check, when not nil, runs after shutdown when the
// tests passed.
func run(m *testing.M, check func() error) int {
	mainActive.Store(true)
	code := m.Run()
	if err := shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: shut down: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if code == 0 && check != nil {
		if err := check(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	return code
}

// requireMain fails tb when the package's TestMain does not call Main.
func requireMain(tb testing.TB) {
	tb.Helper()
	if !mainActive.Load() {
		tb.Fatal("testenv: call testenv.Main or testenv.MainWithLeakCheck from TestMain, so the servers are stopped after the tests")
	}
}
