package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readmeBlock is one fenced block of README.md: its language and text.
type readmeBlock struct {
	lang, text string
}

// readmeBlocks returns README.md's fenced blocks in order.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	var cur *readmeBlock
	for line := range strings.Lines(string(doc)) {
		trimmed := strings.TrimRight(line, "\n")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &readmeBlock{lang: strings.TrimPrefix(trimmed, "```")}
		case cur != nil && trimmed == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line
		}
	}
	if cur != nil {
		t.Fatal("README.md has a fenced block that never closes")
	}
	return blocks
}

// shellCommands are a shell block's command lines, comments and blanks left
// out.
func shellCommands(block string) []string {
	var out []string
	for line := range strings.Lines(block) {
		cmd, _, _ := strings.Cut(line, "#")
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			out = append(out, cmd)
		}
	}
	return out
}

// Where README.md shows a printed value to paste: the key and the admin
// token are the platform's own, printed by make run.
const (
	keyPlaceholder   = "llp_..."
	tokenPlaceholder = "llpadm_..."
)

// readmeReady bounds make run's start: a build of bin/llmplat from a
// cold cache on a busy 2-core machine, then the platform's start.
const readmeReady = 15 * time.Minute

// readmeStop bounds make run's exit after Ctrl-C (SIGINT).
const readmeStop = time.Minute

// TestReadme runs README.md's commands as a newcomer does, in order:
// make run in the background from the repository's root, then, once it
// has printed its lines, every later sh block in one shell with those
// lines pasted where the README shows them. make test is the one command
// not run: it is the suite this test is part of. A block that fails
// (every curl has --fail-with-body) fails the test, as does a README
// whose printed lines no longer look like what make run prints.
func TestReadme(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("the README's commands are POSIX shell")
	}
	for _, tool := range []string{"bash", "curl", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README needs %s: %v", tool, err)
		}
	}
	blocks := readmeBlocks(t)
	if len(blocks) < 3 || blocks[0].lang != "sh" {
		t.Fatalf("README.md should open with the sh block of make run and make test; its blocks: %v", blocks)
	}
	if got := shellCommands(blocks[0].text); len(got) != 2 || got[0] != "make run" || got[1] != "make test" {
		t.Fatalf("README.md's first block is %q, want make run and make test", got)
	}
	var printed string
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for _, b := range blocks[1:] {
		switch b.lang {
		case "text":
			if printed == "" {
				printed = b.text
			}
		case "sh":
			script.WriteString(b.text)
		default:
			t.Fatalf("README.md has a block of %q: the test knows sh (run) and text (output)", b.lang)
		}
	}
	if !strings.Contains(script.String(), keyPlaceholder) || !strings.Contains(script.String(), tokenPlaceholder) {
		t.Fatalf("README.md's commands no longer show where to paste the key (%s) and the admin token (%s)", keyPlaceholder, tokenPlaceholder)
	}

	run := startMakeRun(t)
	lines := run.waitPrinted(t)
	for line := range strings.Lines(printed) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			t.Fatalf("README.md shows the printed line %q, not NAME=value", line)
		}
		got, found := lines[name]
		if !found {
			t.Fatalf("README.md shows make run printing %s; it prints %v", name, lines)
		}
		shown := regexp.QuoteMeta(strings.TrimSuffix(value, "..."))
		if !regexp.MustCompile("^" + shown).MatchString(got) {
			t.Errorf("README.md shows %s=%s; make run printed %s=%s", name, value, name, got)
		}
	}
	filled := strings.ReplaceAll(script.String(), tokenPlaceholder, lines["LLMPLAT_ADMIN_TOKEN"])
	filled = strings.ReplaceAll(filled, keyPlaceholder, lines["OPENAI_API_KEY"])

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", filled)
	sh.Env = cleanEnv()
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &out
	if err := sh.Run(); err != nil {
		t.Fatalf("README.md's commands failed: %v\n%s\nmake run printed:\n%s", err, redact(out.String(), lines), redact(run.output(), lines))
	}
	for _, want := range []string{"data: [DONE]", `"completion_tokens"`, `"id":"llama-8b"`, `"balance_microcredits"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("README.md's commands printed no %s:\n%s", want, redact(out.String(), lines))
		}
	}
	run.stop(t)
	if !strings.Contains(run.output(), "-data-dir keeps them") {
		t.Errorf("make run never said its data goes at exit:\n%s", redact(run.output(), lines))
	}
}

// makeRun is make run in the background.
type makeRun struct {
	cmd  *exec.Cmd
	done chan error
	mu   sync.Mutex
	out  bytes.Buffer
	seen chan map[string]string
}

// startMakeRun starts make run in the repository's root, in a process
// group of its own so that Ctrl-C reaches llmplat too.
func startMakeRun(t *testing.T) *makeRun {
	t.Helper()
	r := &makeRun{done: make(chan error, 1), seen: make(chan map[string]string, 1)}
	r.cmd = exec.Command("make", "run")
	r.cmd.Dir = filepath.Join("..", "..", "..")
	r.cmd.Env = cleanEnv()
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	r.cmd.Stdout, r.cmd.Stderr = pw, pw
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go r.read(pr)
	go func() {
		err := r.cmd.Wait()
		_ = pw.Close()
		r.done <- err
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-r.done:
		case <-time.After(readmeStop):
		}
	})
	return r
}

// read keeps make run's output and hands over its NAME=value lines once
// the admin token's is out.
func (r *makeRun) read(pr io.Reader) {
	lines := map[string]string{}
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		r.mu.Lock()
		r.out.WriteString(sc.Text() + "\n")
		r.mu.Unlock()
		name, value, ok := strings.Cut(sc.Text(), "=")
		if !ok || strings.ContainsAny(name, " \t") || name == "" {
			continue
		}
		lines[name] = value
		if name == "LLMPLAT_ADMIN_TOKEN" {
			r.seen <- lines
			lines = map[string]string{}
		}
	}
	_, _ = io.Copy(io.Discard, pr)
}

// waitPrinted waits for make run's lines.
func (r *makeRun) waitPrinted(t *testing.T) map[string]string {
	t.Helper()
	select {
	case lines := <-r.seen:
		return lines
	case err := <-r.done:
		t.Fatalf("make run exited (%v) before printing its lines:\n%s", err, r.output())
	case <-time.After(readmeReady):
		t.Fatalf("make run printed no lines in %v:\n%s", readmeReady, r.output())
	}
	return nil
}

// stop sends Ctrl-C and waits for make run to end.
func (r *makeRun) stop(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(readmeStop):
		t.Fatalf("make run still running %v after Ctrl-C:\n%s", readmeStop, r.output())
	}
}

func (r *makeRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// cleanEnv is the test's environment without make's own variables, as a
// newcomer's shell has it.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// redact hides the printed key and token in what the test logs.
func redact(s string, lines map[string]string) string {
	for _, name := range []string{"OPENAI_API_KEY", "LLMPLAT_ADMIN_TOKEN"} {
		if v := lines[name]; v != "" {
			s = strings.ReplaceAll(s, v, fmt.Sprintf("<%s>", name))
		}
	}
	return s
}
