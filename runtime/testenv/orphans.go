package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// ownerlessGrace spares a directory without an owner file for this long:
	// another harness may be between creating it and writing the file.
	ownerlessGrace = time.Minute
	// stalePollInterval is how often a signalled stale server is checked.
	stalePollInterval = 20 * time.Millisecond
)

// reapStale stops and removes the instances under root whose owning test
// process is gone, and returns the directories it removed. now is the
// current time, against which ownerless directories are judged.
func reapStale(root string, now time.Time) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(root, instancePrefix+"*"))
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	var removed []string
	var errs []error
	for _, dir := range dirs {
		if !isStale(dir, now) {
			continue
		}
		if err := stopStaleServer(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove stale instance: %w", err))
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// isStale reports whether dir is an instance directory whose owner is gone.
func isStale(dir string, now time.Time) bool {
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, ownerFileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return now.Sub(st.ModTime()) > ownerlessGrace
	case err != nil:
		return false // another user's instance: not ours to judge
	}
	o, err := parseOwner(string(b))
	if err != nil {
		return now.Sub(st.ModTime()) > ownerlessGrace
	}
	return !o.alive()
}

// stopStaleServer stops the server recorded in dir if it still runs there:
// first with SIGTERM, then, after stopGrace, with SIGKILL.
func stopStaleServer(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, serverPIDFileName))
	if err != nil {
		return nil // the server never started
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return nil
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if !processInDir(pid, dir) {
			return nil
		}
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal stale server %d: %w", pid, err)
		}
		for deadline := time.Now().Add(stopGrace); time.Now().Before(deadline); time.Sleep(stalePollInterval) {
			if !processInDir(pid, dir) {
				return nil
			}
		}
	}
	return fmt.Errorf("stale server %d in %s outlived SIGKILL", pid, dir)
}

// sweepOnce makes the stale-instance sweep run once per process, before the
// first server starts.
var sweepOnce sync.Once

// sweepStale removes stale instances under os.TempDir(). It is best effort:
// a failure is reported on stderr and does not stop the tests.
func sweepStale() {
	sweepOnce.Do(func() {
		if _, err := reapStale(os.TempDir(), time.Now()); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: sweep stale instances: %v\n", err)
		}
	})
}
