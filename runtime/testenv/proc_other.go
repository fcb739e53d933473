//go:build unix && !linux

package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// serverProcAttr gives the server its own process group. Outside Linux there
// is no parent-death signal: a killed test process leaves its servers to the
// stale-instance sweep of the next harness.
func serverProcAttr(_ syscall.Signal, cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

// processStartTime returns 0 for a live process: without /proc the harness
// can only tell whether the pid exists.
func processStartTime(pid int) (uint64, error) {
	err := syscall.Kill(pid, 0)
	if err == nil || errors.Is(err, syscall.EPERM) {
		return 0, nil
	}
	return 0, fmt.Errorf("probe process %d: %w", pid, fs.ErrNotExist)
}

// processInDir cannot be checked without /proc, so a stale server is never
// signalled there: a reused pid might belong to anything.
func processInDir(int, string) bool { return false }
