package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// quickstartScript returns the shell block between the quickstart markers
// of docs/operations.md: the test runs what the reader reads.
func quickstartScript(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- quickstart:begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- quickstart:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/operations.md has no quickstart markers")
	}
	block = strings.TrimSpace(block)
	if !strings.HasPrefix(block, "```sh\n") || !strings.HasSuffix(block, "\n```") {
		t.Fatalf("the quickstart is not one sh block:\n%s", block)
	}
	return strings.TrimSuffix(strings.TrimPrefix(block, "```sh\n"), "```")
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestQuickstart runs the split-deployment quickstart of docs/operations.md
// with bash, as written, against real PostgreSQL and Redis and the llmplat
// binary built from this tree: orchestrator, gateway, engine and node agent
// as separate processes, the admin calls, and a first stream.
func TestQuickstart(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("the quickstart is a POSIX shell script")
	}
	for _, tool := range []string{"bash", "curl", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the quickstart needs %s: %v", tool, err)
		}
	}
	script := quickstartScript(t)
	dsn, rds := testenv.Postgres(t), testenv.Redis(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "llmplat"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build llmplat: %v\n%s", err, out)
	}
	_, enginePort, _ := net.SplitHostPort(freeAddr(t))
	logs := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Env = append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LLMPLAT_DATABASE_URL="+dsn, "LLMPLAT_REDIS_URL="+rds.URL, "REDIS_PREFIX="+rds.Prefix,
		"GATEWAY="+freeAddr(t), "NODES="+freeAddr(t), "INTERNAL="+freeAddr(t), "ENGINE_PORT="+enginePort,
		"GATEWAY_METRICS=127.0.0.1:0", "ORCH_METRICS=127.0.0.1:0", "LOG_DIR="+logs)
	// Its own process group, so a timeout stops the servers it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil || !strings.Contains(out.String(), "quickstart: the split deployment served a stream") {
		for _, name := range []string{"orchestrator.log", "gateway.log", "engine.log", "nodeagent.log"} {
			b, _ := os.ReadFile(filepath.Join(logs, name))
			t.Logf("--- %s\n%s", name, b)
		}
		t.Fatalf("the quickstart failed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), `"completion_tokens"`) {
		t.Errorf("the usage the quickstart printed has no completion tokens:\n%s", out.String())
	}
}
