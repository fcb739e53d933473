package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// deadOwner returns the owner record of a process that has exited.
func deadOwner(t *testing.T) owner {
	t.Helper()
	cmd := childCommand(t, "", "PATH="+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run short-lived process: %v: %s", err, out)
	}
	return owner{pid: cmd.Process.Pid, start: 1}
}

// holdIn starts a process whose working directory is dir, standing in for a
// server, and returns a channel closed when it exits.
func holdIn(t *testing.T, dir string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := childCommand(t, "hold", "PATH="+os.Getenv("PATH"))
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stand-in server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return cmd, exited
}

func TestReapStale(t *testing.T) {
	me, err := currentOwner()
	if err != nil {
		t.Fatalf("identify this process: %v", err)
	}
	dead := deadOwner(t)
	tests := []struct {
		name        string
		dirPrefix   string
		owner       string // owner file content; "" for none
		age         time.Duration
		server      bool
		wantRemoved bool
	}{
		{name: "owner alive", dirPrefix: instancePrefix, owner: me.String(), server: true, wantRemoved: false},
		{name: "owner gone", dirPrefix: instancePrefix, owner: dead.String(), server: true, wantRemoved: true},
		{name: "owner pid reused", dirPrefix: instancePrefix, owner: owner{pid: me.pid, start: me.start + 1}.String(), server: true, wantRemoved: true},
		{name: "owner gone, no server", dirPrefix: instancePrefix, owner: dead.String(), wantRemoved: true},
		{name: "no owner file, fresh", dirPrefix: instancePrefix, wantRemoved: false},
		{name: "no owner file, old", dirPrefix: instancePrefix, age: 2 * ownerlessGrace, wantRemoved: true},
		{name: "garbled owner, old", dirPrefix: instancePrefix, owner: "x", age: 2 * ownerlessGrace, wantRemoved: true},
		{name: "not ours", dirPrefix: "other-", owner: dead.String(), server: true, wantRemoved: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir, err := os.MkdirTemp(root, tt.dirPrefix+"x-")
			if err != nil {
				t.Fatal(err)
			}
			if tt.owner != "" {
				if err := os.WriteFile(filepath.Join(dir, ownerFileName), []byte(tt.owner), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var exited <-chan struct{}
			if tt.server {
				var cmd *exec.Cmd
				cmd, exited = holdIn(t, dir)
				pid := []byte(strconv.Itoa(cmd.Process.Pid))
				if err := os.WriteFile(filepath.Join(dir, serverPIDFileName), pid, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			removed, err := reapStale(root, time.Now().Add(tt.age))
			if err != nil {
				t.Fatalf("reapStale: %v", err)
			}
			_, statErr := os.Stat(dir)
			gotRemoved := errors.Is(statErr, fs.ErrNotExist)
			if gotRemoved != tt.wantRemoved || (len(removed) == 1) != tt.wantRemoved {
				t.Errorf("removed = %v (reported %v), want %v", gotRemoved, removed, tt.wantRemoved)
			}
			if tt.server {
				select {
				case <-exited:
					if !tt.wantRemoved {
						t.Errorf("server of a live instance was stopped")
					}
				case <-time.After(100 * time.Millisecond):
					if tt.wantRemoved {
						t.Errorf("server of a stale instance still runs")
					}
				}
			}
		})
	}
}

func TestServersDieWithTestProcess(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		require func(testing.TB)
	}{
		{name: "redis", mode: "redis-hold", require: func(tb testing.TB) { Redis(tb) }},
		{name: "postgres", mode: "postgres-hold", require: func(tb testing.TB) { Postgres(tb) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.require(t) // skips or fails here, by the CI rule, when the service is missing
			cmd := childCommand(t, tt.mode, "PATH="+os.Getenv("PATH"))
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatalf("start child: %v", err)
			}
			killTimer := time.AfterFunc(childTimeout, func() { _ = cmd.Process.Kill() })
			defer killTimer.Stop()
			pid, dir := 0, ""
			var lines []string
			for sc := bufio.NewScanner(stdout); pid == 0 && sc.Scan(); {
				lines = append(lines, sc.Text())
				if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "SERVER" {
					pid, _ = strconv.Atoi(f[1])
					dir = f[2]
				}
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatalf("kill child: %v", err)
			}
			_ = cmd.Wait()
			if pid == 0 {
				t.Fatalf("child reported no server; stdout:\n%s\nstderr:\n%s", strings.Join(lines, "\n"), stderr.String())
			}
			EventuallyNil(t, stopGrace, fmt.Sprintf("server %d to stop after its test process was killed", pid), func() error {
				if _, err := processStartTime(pid); err == nil {
					return errors.New("it still runs")
				}
				return nil
			})
			if _, err := reapStale(os.TempDir(), time.Now()); err != nil {
				t.Errorf("reapStale: %v", err)
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("instance directory %s of the killed process is still there (stat: %v)", dir, err)
			}
		})
	}
}
