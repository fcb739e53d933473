package twin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stopWait bounds a process's exit after SIGTERM before it is killed: the
// control plane's components stop in a second or two; a loaded machine
// gets ten.
const stopWait = 10 * time.Second

// logTail is how much of a process's output a failed test shows.
const logTail = 4 << 10

// Process is one program the twin runs, its output in a file of the
// twin's folder.
type Process struct {
	Name string
	// Log is the path of its combined output.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	stopOnce sync.Once
}

// Start runs bin with args (and env added to this process's environment)
// as the twin's process name, in a process group of its own that dies with
// the test. The test's end stops it (SIGTERM, then SIGKILL after stopWait)
// and, when the test failed, prints the tail of its output.
func (c *Cluster) Start(tb testing.TB, name, bin string, args []string, env ...string) *Process {
	tb.Helper()
	log := filepath.Join(c.Dir, name+".log")
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		tb.Fatalf("twin: start %s: %v", name, err)
	}
	p := &Process{Name: name, Log: log, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			tb.Logf("twin: the last of %s's output:\n%s", name, p.Tail(logTail))
		}
	})
	return p
}

// Stop ends the process: SIGTERM to its group, SIGKILL after stopWait.
func (p *Process) Stop() {
	p.stopOnce.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopWait):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
}

// Kill ends the process at once, as a node's death does.
func (p *Process) Kill() {
	p.stopOnce.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Tail returns up to n bytes of the end of the process's output.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	return tail(b, n)
}

// tail is up to n bytes of the end of b, from a line's start.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// waitAlive waits until ready reports nil or the process ends, up to
// within; it fails the test with the reason and the process's output.
func (p *Process) waitAlive(tb testing.TB, within time.Duration, what string, ready func(context.Context) error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last error
	for {
		if last = ready(ctx); last == nil {
			return
		}
		select {
		case <-p.done:
			tb.Fatalf("twin: %s exited (%v) before %s; its output:\n%s", p.Name, p.err, what, p.Tail(logTail))
		case <-ctx.Done():
			tb.Fatalf("twin: %s: no %s within %v: %v; its output:\n%s", p.Name, what, within,
				errors.Join(last, ctx.Err()), p.Tail(logTail))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// String names the process for messages.
func (p *Process) String() string { return fmt.Sprintf("%s (pid %d)", p.Name, p.cmd.Process.Pid) }
