package testenv

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// childWait bounds a child process's start and its stop.
const childWait = 30 * time.Second

// StartChild runs this test binary again as a child process, with the
// environment variable env set to config as JSON, for a test that needs a
// part in a process of its own: the child's TestMain sees env and runs the
// part instead of the tests. The child prints one line on stdout when it is
// ready; StartChild returns that line. When the test ends it closes the
// child's stdin, the child's signal to stop, and waits for it to exit.
func StartChild(tb testing.TB, env string, config any) string {
	tb.Helper()
	return StartChildWithin(tb, env, config, childWait)
}

// StartChildWithin is StartChild for a child that may take up to ready to
// print its line: one that does long work before it is ready.
func StartChildWithin(tb testing.TB, env string, config any, ready time.Duration) string {
	tb.Helper()
	line, _ := StartStoppableChild(tb, env, config, ready)
	return line
}

// StartStoppableChild is StartChildWithin that also returns stop, which
// closes the child's stdin and waits for it to exit, before the test ends
// (the test's end then does nothing more). Stop is safe to call more than
// once.
func StartStoppableChild(tb testing.TB, env string, config any, ready time.Duration) (string, func()) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := json.Marshal(config)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start child %s: %v", env, err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		exited <- cmd.Wait() // after the read: Wait closes stdout
	}()
	stop := sync.OnceFunc(func() {
		stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				tb.Errorf("child %s: %v", env, err)
			}
		case <-time.After(childWait):
			_ = cmd.Process.Kill()
			<-exited
			tb.Errorf("child %s did not exit when asked", env)
		}
	})
	tb.Cleanup(stop)
	select {
	case line := <-lines:
		if line == "" {
			tb.Fatalf("child %s exited before it was ready", env)
		}
		return strings.TrimSpace(line), stop
	case <-time.After(ready):
		_ = cmd.Process.Kill()
		tb.Fatalf("child %s did not start", env)
		return "", stop
	}
}
