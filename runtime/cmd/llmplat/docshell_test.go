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
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// The machinery that runs a document's commands as its reader would, shared
// by TestReadme and TestDocs: the document's fenced blocks, make run in the
// background, and its shell blocks in one shell from the repository's root.

// repoRoot is the repository's root, where a reader runs the commands.
var repoRoot = filepath.Join("..", "..", "..")

// docBlock is one fenced block of a Markdown document.
type docBlock struct {
	// lang is the fence's info string: sh (run), text (output shown), json…
	lang, text string
	// line is the line of its opening fence, for messages.
	line int
	// notRun is why the block is not run here, from a "<!-- not run: why -->"
	// comment among the HTML comments right above its fence; empty for a
	// block that runs.
	notRun string
}

// notRunComment marks the next block as one that cannot run here.
var notRunComment = regexp.MustCompile(`^<!-- not run: (.+) -->$`)

// docBlocks returns the fenced blocks of the document at path (from the
// repository's root), in order.
func docBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks []docBlock
		cur    *docBlock
		notRun string
		n      int
	)
	for line := range strings.Lines(string(doc)) {
		n++
		trimmed := strings.TrimRight(line, "\n")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &docBlock{lang: strings.TrimPrefix(trimmed, "```"), line: n, notRun: notRun}
			notRun = ""
		case cur != nil && trimmed == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line
		case notRunComment.MatchString(trimmed):
			notRun = notRunComment.FindStringSubmatch(trimmed)[1]
		case strings.HasPrefix(trimmed, "<!--") || trimmed == "":
			// other comments (markers) and blank lines keep a pending mark
		default:
			notRun = "" // prose: a mark applies only right above a fence
		}
	}
	if cur != nil {
		t.Fatalf("%s has a fenced block at line %d that never closes", path, cur.line)
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

// checkSyntax parses a block that is not run with bash -n, so that a
// command nobody runs here still parses.
func checkSyntax(t *testing.T, path string, b docBlock) {
	t.Helper()
	cmd := exec.Command("bash", "-n")
	cmd.Stdin = strings.NewReader(b.text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s:%d, a block not run (%s), does not parse: %v\n%s", path, b.line, b.notRun, err, out)
	}
}

// Where a document shows a printed value to paste: the key and the admin
// token are the platform's own, printed by make run.
const (
	keyPlaceholder   = "llp_..."
	tokenPlaceholder = "llpadm_..."
)

// pastePrinted puts make run's printed key and admin token where the
// script shows their placeholders, as a reader pastes them.
func pastePrinted(script string, lines map[string]string) string {
	filled := strings.ReplaceAll(script, tokenPlaceholder, lines["LLMPLAT_ADMIN_TOKEN"])
	return strings.ReplaceAll(filled, keyPlaceholder, lines["OPENAI_API_KEY"])
}

// readmeReady bounds make run's start: a build of bin/llmplat from a
// cold cache on a busy 2-core machine, then the platform's start.
const readmeReady = 15 * time.Minute

// readmeStop bounds make run's exit after Ctrl-C (SIGINT).
const readmeStop = time.Minute

// makeRun is make run in the background.
type makeRun struct {
	cmd  *exec.Cmd
	done chan error
	mu   sync.Mutex
	out  bytes.Buffer
	seen chan map[string]string
}

// startMakeRun runs line, make run as a document shows it (with its
// ARGS), with bash in the repository's root, in a process group of its own
// so that Ctrl-C reaches llmplat too. Its temporary data goes under tmp.
func startMakeRun(t *testing.T, line, tmp string) *makeRun {
	t.Helper()
	r := &makeRun{done: make(chan error, 1), seen: make(chan map[string]string, 1)}
	r.cmd = exec.Command("bash", "-c", "exec "+line)
	r.cmd.Dir = repoRoot
	r.cmd.Env = append(testenv.CleanEnv(), "TMPDIR="+tmp)
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

// runScript runs script with bash in the repository's root, as a reader's
// second shell beside make run, its temporary files under tmp, within
// limit. It returns what the script printed. What the script left running
// in the background (an engine, a node agent) is stopped when it ends: a
// reader closes that shell.
func runScript(t *testing.T, script, tmp string, limit time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	// A file, not a pipe: background jobs keep their copy of the output
	// open, and waiting for a pipe's end would wait for them.
	out, err := os.CreateTemp(t.TempDir(), "script-output")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	sh := exec.CommandContext(ctx, "bash", "-c", script)
	sh.Dir = repoRoot
	sh.Env = append(testenv.CleanEnv(), "TMPDIR="+tmp)
	sh.Stdout, sh.Stderr = out, out
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sh.Cancel = func() error { return syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) }
	runErr := sh.Run()
	if sh.Process != nil {
		_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
	}
	printed, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(printed), runErr
}

// untracked lists the files of the repository that git does not track and
// does not ignore; nil when git cannot tell (no git, not a checkout).
func untracked(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--others", "--exclude-standard")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// checkLeftClean fails the test when the files git would show as new
// differ from before: a document's commands keep their scratch files out
// of the reader's checkout.
func checkLeftClean(t *testing.T, path string, before []string) {
	t.Helper()
	if before == nil {
		return
	}
	var left []string
	for _, f := range untracked(t) {
		if !slices.Contains(before, f) {
			left = append(left, f)
		}
	}
	if len(left) > 0 {
		t.Errorf("%s's commands left files in the checkout: %v", path, left)
	}
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
