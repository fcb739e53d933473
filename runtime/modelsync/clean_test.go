//go:build linux || darwin

package modelsync_test

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/modelsync"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// lockSeenWait bounds the wait for a sync to take (or wait for) a
// revision's lock; it does within milliseconds, the slack is for a loaded
// machine.
const lockSeenWait = 30 * time.Second

const day = 24 * time.Hour

// smallRevision uploads a small revision of model and returns its files.
func smallRevision(t *testing.T, s *store, model, rev string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{"config.json": []byte(`{"rev":"` + rev + `"}`), "model.safetensors": random(t, 64<<10)}
	for name, data := range files {
		s.put(t, model+"/"+rev+"/"+name, data)
	}
	return files
}

// TestSyncRemovesRevisionsNoLongerUsed: after a sync, the model's other
// revisions are removed unless they are among the most recently used
// (KeepRevisions, this one included) or were used (synced, or found for a
// starting pod) within KeepUnused.
func TestSyncRemovesRevisionsNoLongerUsed(t *testing.T) {
	type use struct {
		rev   string
		after time.Duration // since the start
	}
	tests := []struct {
		name string
		uses []use // the last one is the sync whose clean is checked
		// lastRemoved is what the last sync's clean removed; kept is what
		// the model's folder holds in the end.
		lastRemoved []string
		kept        []string
	}{
		{
			name:        "old and unused revisions go, the newest other stays",
			uses:        []use{{"r1", 0}, {"r2", day}, {"r3", 2 * day}, {"r4", 10 * day}},
			lastRemoved: []string{"r2", "r1"},
			kept:        []string{"r4", "r3"},
		},
		{
			// r1 started a pod on day 9: without that stamp it would be the
			// oldest and go; r3 is not among the newest but was used within
			// the week; r2 went at r1's start.
			name: "a revision a pod started on stays, as does one used within the window",
			uses: []use{{"r1", 0}, {"r2", day}, {"r3", 5 * day}, {"r1", 9 * day}, {"r4", 10 * day}},
			kept: []string{"r4", "r1", "r3"},
		},
		{
			name: "everything used within the window stays",
			uses: []use{{"r1", 0}, {"r2", day}, {"r3", 2 * day}, {"r4", 3 * day}},
			kept: []string{"r4", "r3", "r2", "r1"},
		},
		{
			name: "the one other revision stays however old",
			uses: []use{{"r1", 0}, {"r2", 100 * day}},
			kept: []string{"r2", "r1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			files := map[string]map[string][]byte{}
			for _, r := range []string{"r1", "r2", "r3", "r4"} {
				files[r] = smallRevision(t, s, "llama", r)
			}
			smallRevision(t, s, "other-model", "r1")
			dest := t.TempDir()
			start := time.Now()
			clk := testingclock.NewFakeClock(start)
			if _, err := modelsync.Sync(t.Context(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "other-model", Revision: "r1", Dest: dest,
				Clock: clk}); err != nil {
				t.Fatal(err)
			}
			var res modelsync.Result
			for _, u := range tt.uses {
				var err error
				clk.SetTime(start.Add(u.after))
				res, err = modelsync.Sync(t.Context(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "llama", Revision: u.rev, Dest: dest,
					KeepUnused: 7 * day, KeepRevisions: 2, Clock: clk})
				if err != nil {
					t.Fatalf("sync %s: %v", u.rev, err)
				}
			}
			if !slices.Equal(res.Removed, tt.lastRemoved) {
				t.Errorf("Removed = %v, want %v", res.Removed, tt.lastRemoved)
			}
			for _, r := range tt.kept {
				same(t, filepath.Join(dest, "llama", r), files[r])
			}
			if _, err := os.Stat(filepath.Join(dest, "other-model", "r1", modelsync.MarkerName)); err != nil {
				t.Errorf("another model's revision was touched: %v", err)
			}
			left, err := os.ReadDir(filepath.Join(dest, "llama"))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range left {
				names = append(names, e.Name())
			}
			slices.Sort(names)
			want := slices.Sorted(slices.Values(tt.kept))
			if !slices.Equal(names, want) {
				t.Errorf("the model's folder holds %v, want %v", names, want)
			}
		})
	}
}

// TestCleanLeavesARevisionBeingSynced: an old revision another sync is
// copying right now (it holds the revision's lock) is not removed by the
// clean of a newer revision's sync, however old its stamp; the copy then
// finishes whole.
func TestCleanLeavesARevisionBeingSynced(t *testing.T) {
	s := newStore(t)
	oldFiles := smallRevision(t, s, "llama", "old")
	newFiles := smallRevision(t, s, "llama", "new")
	smallRevision(t, s, "llama", "newer")
	dest := t.TempDir()
	start := time.Now()
	at := func(d time.Duration) *testingclock.FakeClock { return testingclock.NewFakeClock(start.Add(d)) }
	for _, r := range []string{"new", "newer"} {
		if _, err := modelsync.Sync(t.Context(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "llama", Revision: r, Dest: dest, Clock: at(0)}); err != nil {
			t.Fatal(err)
		}
	}

	// The old revision's copy holds its lock while its reads are held.
	gate := make(chan struct{})
	s.gate.Store(&gate)
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	t.Cleanup(open)
	done := make(chan error, 1)
	go func() {
		_, err := modelsync.Sync(t.Context(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "llama", Revision: "old", Dest: dest, Clock: at(0)})
		done <- err
	}()
	waitLocked(t, filepath.Join(dest, "llama", "old"), done)

	// Thirty days on, the node syncs "newer" again (a pod starts on it):
	// "old" is neither recent nor among the newest, but it is being copied.
	res, err := modelsync.Sync(t.Context(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "llama", Revision: "newer", Dest: dest,
		KeepRevisions: 1, KeepUnused: day, Clock: at(30 * day)})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(res.Removed, "old") {
		t.Errorf("Removed = %v: the revision being copied was removed", res.Removed)
	}
	if !slices.Equal(res.Removed, []string{"new"}) {
		t.Errorf("Removed = %v, want [new]", res.Removed)
	}
	open()
	if err := <-done; err != nil {
		t.Fatalf("the old revision's sync: %v", err)
	}
	same(t, filepath.Join(dest, "llama", "old"), oldFiles)
	_ = newFiles
}

// TestSyncWaitingWhileItsRevisionIsRemoved: a sync waiting for its
// revision's lock while a clean holds it and moves the folder away makes
// the folder again and copies into it, not into the folder being removed.
func TestSyncWaitingWhileItsRevisionIsRemoved(t *testing.T) {
	s := newStore(t)
	files := smallRevision(t, s, "llama", "rev1")
	dest := t.TempDir()
	dir := filepath.Join(dest, "llama", "rev1")
	release := holdLock(t, dir)
	waiting := make(chan struct{})
	log := slog.New(onMessage{"another modelsync is copying this revision; waiting for it", sync.OnceFunc(func() { close(waiting) })})
	done := make(chan error, 1)
	go func() {
		_, err := modelsync.Sync(t.Context(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "llama", Revision: "rev1", Dest: dest, Logger: log})
		done <- err
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("the sync ended without waiting for the lock: %v", err)
	}
	// What a clean does under the lock: move the folder away, then let go.
	trash := filepath.Join(dest, "llama", ".llmplat-removing-test")
	if err := os.Rename(dir, trash); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("Sync: %v", err)
	}
	same(t, dir, files)
	if _, err := os.Stat(filepath.Join(trash, modelsync.MarkerName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the sync wrote its marker into the folder being removed (%v)", err)
	}
}

// waitLocked waits until another holds dir's revision lock, failing if
// done (the holder) ends first.
func waitLocked(t *testing.T, dir string, done <-chan error) {
	t.Helper()
	testenv.EventuallyNil(t, lockSeenWait, "a sync to hold "+dir+"'s lock", func() error {
		f, err := os.OpenFile(filepath.Join(dir, modelsync.LockName), os.O_RDWR, 0)
		if err == nil {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			f.Close() // also releases it when it was free
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil
			}
			if err == nil {
				err = errors.New("the lock is free")
			}
		}
		select {
		case derr := <-done:
			t.Fatalf("the sync ended before it was seen holding its lock: %v", derr)
		default:
		}
		return err
	})
}
