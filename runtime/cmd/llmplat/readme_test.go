package main

import (
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// readmeScript bounds README.md's commands after make run: a stream and
// three calls, seconds on any machine.
const readmeScript = 2 * time.Minute

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
	blocks := docBlocks(t, "README.md")
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

	tmp := t.TempDir()
	run := startMakeRun(t, "make run", tmp)
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
	before := untracked(t)
	t.Cleanup(func() { checkLeftClean(t, "README.md", before) }) // failed commands too
	out, err := runScript(t, pastePrinted(script.String(), lines), tmp, readmeScript)
	if err != nil {
		t.Fatalf("README.md's commands failed: %v\n%s\nmake run printed:\n%s", err, redact(out, lines), redact(run.output(), lines))
	}
	for _, want := range []string{"data: [DONE]", `"completion_tokens"`, `"id":"llama-8b"`, `"balance_microcredits"`} {
		if !strings.Contains(out, want) {
			t.Errorf("README.md's commands printed no %s:\n%s", want, redact(out, lines))
		}
	}
	run.stop(t)
	if !strings.Contains(run.output(), "-data-dir keeps them") {
		t.Errorf("make run never said its data goes at exit:\n%s", redact(run.output(), lines))
	}
}
