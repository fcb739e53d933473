//go:build linux

package testenv

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// serverProcAttr makes a server die with the test process: the kernel sends
// it sig when the thread that started it exits. The server also gets its own
// process group so a terminal's Ctrl-C reaches only the test process, which
// then stops the server in order.
func serverProcAttr(sig syscall.Signal, cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: sig, Setpgid: true, Credential: cred}
}

// processStartTime returns when the process started, in clock ticks since
// boot, so that a pid reused by another process is not mistaken for the
// original. It returns an error wrapping fs.ErrNotExist when there is no such
// process, or when only its zombie is left.
func processStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("read process stat: %w", err)
	}
	// The command name (field 2) may hold spaces and parentheses; the fields
	// after its closing parenthesis start at field 3 (state).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse process stat of %d: no command name", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) > 0 && fields[0] == "Z" {
		return 0, fmt.Errorf("process %d is a zombie: %w", pid, fs.ErrNotExist)
	}
	const startTimeField = 22 - 3 // field 22 of proc_pid_stat(5), counted from field 3
	if len(fields) <= startTimeField {
		return 0, fmt.Errorf("parse process stat of %d: %d fields", pid, len(fields))
	}
	start, err := strconv.ParseUint(fields[startTimeField], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse process start time of %d: %w", pid, err)
	}
	return start, nil
}

// processInDir reports whether the process runs with its working directory
// inside dir. Both servers change into their directory, so this tells a stale
// server from an unrelated process that reused its pid.
func processInDir(pid int, dir string) bool {
	cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(dir, cwd)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
