//go:build linux || darwin

package modelsync_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/modelsync"
)

// envSyncChild makes this test binary a second process that runs one Sync
// (its value, JSON: a childSync) and prints the Result as JSON.
const envSyncChild = "MODELSYNC_TEST_SYNC_CHILD"

// childSync is what a child process syncs.
type childSync struct {
	URL, Model, Revision, Dest string
}

func init() {
	raw, ok := os.LookupEnv(envSyncChild)
	if !ok {
		return
	}
	var c childSync
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s := &store{url: c.URL}
	res, err := modelsync.Sync(context.Background(), modelsync.Config{S3: s.client(), Bucket: bucket,
		Model: c.Model, Revision: c.Revision, Dest: c.Dest, Parallel: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	os.Exit(0)
}

// gateWait bounds how long the test holds the S3 reads back for every
// sync to list; past it the reads go on and the test reports the count.
const gateWait = 30 * time.Second

// TestConcurrentSyncsOfOneRevision: replicas of one model started on one
// node together (goroutines here, and processes, as pods are) all sync
// the same revision into the same cache. The S3 reads are held until
// every sync has listed the revision, so all of them are past the marker
// check at once. Each must succeed; one copies, the others wait for it
// and find its marker; every object is read once; the files are whole.
func TestConcurrentSyncsOfOneRevision(t *testing.T) {
	s := newStore(t)
	files := revision(t, s, "llama-8b", "rev1")
	dest := t.TempDir()
	const goroutines, processes = 6, 2
	const syncs = goroutines + processes

	gate := make(chan struct{})
	s.gate.Store(&gate)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(gate)
		deadline := time.Now().Add(gateWait)
		for s.lists.Load() < syncs && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Cleanup(wg.Wait)

	type outcome struct {
		res modelsync.Result
		err error
	}
	outcomes := make(chan outcome, syncs)
	cfg := modelsync.Config{S3: s.client(), Bucket: bucket, Model: "llama-8b", Revision: "rev1", Dest: dest, Parallel: 2}
	for range goroutines {
		wg.Go(func() {
			res, err := modelsync.Sync(t.Context(), cfg)
			outcomes <- outcome{res, err}
		})
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(childSync{URL: s.url, Model: "llama-8b", Revision: "rev1", Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	for range processes {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), envSyncChild+"="+string(raw))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			var o outcome
			if err != nil {
				o.err = fmt.Errorf("child: %w: %s", err, stderr.String())
			} else if err := json.Unmarshal(out, &o.res); err != nil {
				o.err = fmt.Errorf("child printed %q: %w", out, err)
			}
			outcomes <- o
		})
	}

	copies := 0
	for range syncs {
		o := <-outcomes
		if o.err != nil {
			t.Errorf("a sync failed: %v", o.err)
			continue
		}
		if !o.res.Skipped {
			copies++
		}
	}
	if got := s.lists.Load(); got < syncs {
		t.Errorf("%d listings, want %d: the syncs did not all reach the copy together", got, syncs)
	}
	if copies != 1 {
		t.Errorf("%d syncs copied, want 1: the others wait for it and find its marker", copies)
	}
	if got, want := s.gets.Load(), int64(len(files)); got != want {
		t.Errorf("%d object reads, want %d: each object once", got, want)
	}
	if got, want := s.sent.Load(), total(files); got != want {
		t.Errorf("%d bytes read from S3, want %d: the revision once", got, want)
	}
	dir := filepath.Join(dest, "llama-8b", "rev1")
	same(t, dir, files)
	if _, err := os.Stat(filepath.Join(dir, modelsync.MarkerName)); err != nil {
		t.Errorf("no marker: %v", err)
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.HasSuffix(p, ".partial") || d.Name() == modelsync.MarkerTemp) {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

// TestSyncWaitingForTheLockEndsWithItsContext: a sync that waits for
// another's lock gives up when its context ends, saying what it waited
// for, and leaves the holder's copy alone.
func TestSyncWaitingForTheLockEndsWithItsContext(t *testing.T) {
	s := newStore(t)
	revision(t, s, "llama-8b", "rev1")
	dest := t.TempDir()
	dir := filepath.Join(dest, "llama-8b", "rev1")
	holdLock(t, dir)
	ctx, cancel := context.WithCancel(t.Context())
	waiting := make(chan struct{})
	log := slog.New(onMessage{"another modelsync is copying this revision; waiting for it", sync.OnceFunc(func() { close(waiting) })})
	done := make(chan error, 1)
	go func() {
		_, err := modelsync.Sync(ctx, modelsync.Config{S3: s.client(), Bucket: bucket, Model: "llama-8b", Revision: "rev1", Dest: dest, Logger: log})
		done <- err
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("the sync ended without waiting for the lock: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for the lock") {
		t.Fatalf("err = %v, want the wait for the lock cancelled", err)
	}
	if s.gets.Load() != 0 {
		t.Errorf("%d object reads while another held the lock", s.gets.Load())
	}
}

// onMessage is a slog handler that calls do when msg is logged.
type onMessage struct {
	msg string
	do  func()
}

func (h onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.do()
	}
	return nil
}
func (h onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onMessage) WithGroup(string) slog.Handler      { return h }

// holdLock makes a revision's folder and holds its lock, as another
// modelsync copying it would, until release is called or the test ends.
func holdLock(t *testing.T, dir string) (release func()) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	holder, err := os.OpenFile(filepath.Join(dir, modelsync.LockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	release = sync.OnceFunc(func() { holder.Close() })
	t.Cleanup(release)
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return release
}
