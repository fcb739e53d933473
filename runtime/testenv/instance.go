package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// instancePrefix starts the name of every server directory the harness
// creates under os.TempDir(); the stale-instance sweep looks only at these.
const instancePrefix = "llmplat-testenv-"

// Files inside an instance directory.
const (
	ownerFileName     = "owner"      // "<pid> <start time>" of the test process
	serverPIDFileName = "server.pid" // pid of the server process
	serverLogFileName = "server.log" // the server's stdout and stderr
)

// logTailBytes is how much of a server's log goes into an error: enough for
// the lines that say why it stopped.
const logTailBytes = 2048

// owner identifies the test process that started an instance. start tells
// the process from a later one that reused its pid; it is 0 where the
// platform cannot tell.
type owner struct {
	pid   int
	start uint64
}

// currentOwner returns the owner record of this process.
func currentOwner() (owner, error) {
	pid := os.Getpid()
	start, err := processStartTime(pid)
	if err != nil {
		return owner{}, err
	}
	return owner{pid: pid, start: start}, nil
}

// String formats the owner as stored in the owner file.
func (o owner) String() string {
	return strconv.Itoa(o.pid) + " " + strconv.FormatUint(o.start, 10) + "\n"
}

// parseOwner reads an owner file's content.
func parseOwner(s string) (owner, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return owner{}, fmt.Errorf("parse owner %q: want 2 fields", s)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return owner{}, fmt.Errorf("parse owner pid: %w", err)
	}
	if pid <= 0 {
		return owner{}, fmt.Errorf("parse owner pid: %d is not a process id", pid)
	}
	start, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return owner{}, fmt.Errorf("parse owner start %q: %w", f[1], err)
	}
	return owner{pid: pid, start: start}, nil
}

// alive reports whether the owning process still runs.
func (o owner) alive() bool {
	start, err := processStartTime(o.pid)
	return err == nil && start == o.start
}

// newInstanceDir creates a server directory under os.TempDir() and records
// this process as its owner.
func newInstanceDir(kind string) (string, error) {
	o, err := currentOwner()
	if err != nil {
		return "", fmt.Errorf("identify test process: %w", err)
	}
	dir, err := os.MkdirTemp(os.TempDir(), instancePrefix+kind+"-")
	if err != nil {
		return "", fmt.Errorf("create %s directory: %w", kind, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFileName), []byte(o.String()), 0o644); err != nil {
		return "", errors.Join(fmt.Errorf("write owner file: %w", err), os.RemoveAll(dir))
	}
	return dir, nil
}

// freePort returns a loopback TCP port that was free a moment ago. Another
// process may take it before the server binds it, so callers retry.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("release probe port: %w", err)
	}
	return port, nil
}

// chownTree gives dir and everything in it to uid:gid.
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// logTail returns the end of the server log in dir, for error messages.
func logTail(dir string) string {
	f, err := os.Open(filepath.Join(dir, serverLogFileName))
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > logTailBytes {
		if _, err := f.Seek(-logTailBytes, io.SeekEnd); err != nil {
			return ""
		}
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}

// credential returns the process credential of a named account, for
// starting a server under it.
func credential(uid, gid int) *syscall.Credential {
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}
