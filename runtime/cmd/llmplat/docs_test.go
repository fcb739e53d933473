package main

import (
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// runDocs are the guides whose shell blocks TestDocs runs. README.md has
// TestReadme, which also checks the lines it shows make run printing;
// docs/operations.md's quickstart script is TestQuickstart's.
var runDocs = []string{"docs/operations.md", "docs/terraform.md", "docs/console.md"}

// docScript bounds one document's commands after make run: make build (a
// build of the provider from a cold cache on a busy 2-core machine), then
// a Terraform apply, or an engine and its agent, against the platform.
const docScript = 10 * time.Minute

// shellLangs are the fence info strings of blocks a reader types into a
// shell.
var shellLangs = []string{"sh", "bash", "shell"}

// TestDocs runs each guide's commands as its reader does, one guide at a
// time against a fresh make run: the sh block that is only make run (with
// its ARGS) starts it in the background, or a plain make run when the
// guide has none; once it has printed its lines, every other sh block runs
// in order in one shell from the repository's root, with the printed key
// and admin token pasted where the guide shows llp_... and llpadm_.... A
// command that fails fails the test, and so do files the commands leave in
// the checkout. A block that cannot run here (it needs an AWS account, a
// real cluster, your own PostgreSQL) says so in a "<!-- not run: why -->"
// comment right above its fence and is parsed with bash -n instead. Every
// fence names its language, so a shell block cannot pass for output.
func TestDocs(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("the guides' commands are POSIX shell")
	}
	for _, tool := range []string{"bash", "curl", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the guides need %s: %v", tool, err)
		}
	}
	for _, path := range runDocs {
		t.Run(strings.TrimPrefix(path, "docs/"), func(t *testing.T) { runDoc(t, path) })
	}
}

// runDoc runs the guide at path.
func runDoc(t *testing.T, path string) {
	platform := ""
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	run := 0
	for _, b := range docBlocks(t, path) {
		switch {
		case b.lang == "":
			t.Errorf("%s:%d: a fence without a language: say sh (run), text (output shown), json, hcl…", path, b.line)
		case !isShell(b.lang):
		case b.notRun != "":
			checkSyntax(t, path, b)
		case isMakeRun(b.text):
			if platform != "" {
				t.Fatalf("%s:%d starts make run a second time", path, b.line)
			}
			platform = shellCommands(b.text)[0]
		default:
			script.WriteString(b.text)
			run++
		}
	}
	if t.Failed() || run == 0 {
		return // a guide of prose and output: nothing to run
	}
	if strings.Contains(script.String(), "terraform ") {
		if _, err := exec.LookPath("terraform"); err != nil {
			testenv.Missing(t, "terraform", path+" runs terraform: "+err.Error(), "install Terraform 1.11 or later")
		}
	}
	if platform == "" {
		platform = "make run"
	}
	tmp := t.TempDir()
	mr := startMakeRun(t, platform, tmp)
	lines := mr.waitPrinted(t)
	before := untracked(t)
	t.Cleanup(func() { checkLeftClean(t, path, before) }) // failed commands too
	out, err := runScript(t, pastePrinted(script.String(), lines), tmp, docScript)
	if err != nil {
		t.Fatalf("%s's commands failed: %v\n%s\n%s printed:\n%s", path, err, redact(out, lines), platform, redact(mr.output(), lines))
	}
	t.Logf("%s's commands printed:\n%s", path, redact(out, lines))
	mr.stop(t)
}

// isShell reports whether lang is a shell block's.
func isShell(lang string) bool { return slices.Contains(shellLangs, lang) }

// isMakeRun reports whether a shell block is only make run, with its
// ARGS: the platform the guide's other commands run against.
func isMakeRun(block string) bool {
	cmds := shellCommands(block)
	return len(cmds) == 1 && (cmds[0] == "make run" || strings.HasPrefix(cmds[0], "make run "))
}
