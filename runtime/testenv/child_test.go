package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const (
	// envChild selects what TestHelperChild does in a child process.
	envChild = "LLMPLAT_TESTENV_CHILD"
	// childHold is how long a holding child waits to be killed; its parent
	// kills it within seconds, this only bounds a child left behind.
	childHold = 2 * time.Minute
	// childTimeout bounds one child test process.
	childTimeout = 3 * time.Minute
)

// TestHelperChild is not a test of its own: other tests run it in a child
// process of the test binary, with envChild saying what to do.
func TestHelperChild(t *testing.T) {
	mode := os.Getenv(envChild)
	switch mode {
	case "":
		t.Skip("helper run in a child process by the tests in child_test.go and orphans_test.go")
	case "hold":
		time.Sleep(childHold)
	case "postgres-missing":
		postgresBinRoot = t.TempDir()
		t.Logf("got %s", Postgres(t))
	case "redis-missing":
		t.Logf("got %+v", Redis(t))
	case "postgres-hold":
		Postgres(t)
		fmt.Printf("SERVER %d %s\n", fast.srv.proc.cmd.Process.Pid, fast.srv.proc.dir)
		time.Sleep(childHold)
	case "redis-hold":
		Redis(t)
		fmt.Printf("SERVER %d %s\n", redisState.srv.srv.cmd.Process.Pid, redisState.srv.srv.dir)
		time.Sleep(childHold)
	default:
		t.Fatalf("unknown %s=%q", envChild, mode)
	}
}

// childCommand returns a command that runs TestHelperChild in mode, with the
// harness's variables cleared and extra set.
func childCommand(t *testing.T, mode string, extra ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("find test binary: %v", err)
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", envCI, envChild, envDatabaseURL, envRedisURL:
			continue
		}
		env = append(env, kv)
	}
	cmd := exec.Command(exe, "-test.run=^TestHelperChild$", "-test.v", "-test.timeout="+childTimeout.String())
	// The race detector's default pause at exit would add a second to
	// every child.
	env = append(env, "GORACE=atexit_sleep_ms=0", envChild+"="+mode)
	cmd.Env = append(env, extra...)
	return cmd
}

func TestMissingService(t *testing.T) {
	tests := []struct {
		name     string
		mode     string
		ci       string
		wantFail bool
		wantText string
	}{
		{name: "postgres under CI fails", mode: "postgres-missing", ci: "true", wantFail: true, wantText: "initdb"},
		{name: "postgres outside CI skips", mode: "postgres-missing", ci: "", wantFail: false, wantText: "initdb"},
		{name: "redis under CI fails", mode: "redis-missing", ci: "true", wantFail: true, wantText: "redis-server"},
		{name: "redis outside CI skips", mode: "redis-missing", ci: "", wantFail: false, wantText: "redis-server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// An empty PATH hides the servers' binaries and the package manager.
			cmd := childCommand(t, tt.mode, "PATH="+t.TempDir(), envCI+"="+tt.ci)
			out, err := cmd.CombinedOutput()
			text := string(out)
			if tt.wantFail {
				if err == nil || !strings.Contains(text, "--- FAIL: TestHelperChild") {
					t.Fatalf("child exit = %v, want a failed test; output:\n%s", err, text)
				}
			} else if err != nil || !strings.Contains(text, "--- SKIP: TestHelperChild") {
				t.Fatalf("child exit = %v, want a skipped test; output:\n%s", err, text)
			}
			for _, want := range []string{"is not available", tt.wantText, "install"} {
				if !strings.Contains(text, want) {
					t.Errorf("child output lacks %q; output:\n%s", want, text)
				}
			}
		})
	}
}
