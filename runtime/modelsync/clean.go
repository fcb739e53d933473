package modelsync

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

const (
	// DefaultKeepRevisions is how many revisions of a model the cache keeps
	// at least, the one just synced included: it and the one before, which
	// the old pods of a rollout still on the node run.
	DefaultKeepRevisions = 2
	// DefaultKeepUnused keeps every revision a pod on the node synced or
	// started within it: an engine reads its revision's files again at
	// every container restart, and a week covers the pods a rollout has
	// not replaced yet while bounding what an idle node keeps.
	DefaultKeepUnused = 7 * 24 * time.Hour
)

// usedName is the revision's use stamp: its modification time is when a
// sync last copied or found the revision for a pod starting on it. Like
// the marker it starts with reservedPrefix.
const usedName = reservedPrefix + "used"

// trashPrefix names a revision's folder while it is removed, in the
// model's folder: no revision is looked for under such a name, and one
// left by a removal that was interrupted is removed by the next.
const trashPrefix = reservedPrefix + "removing-"

// maxReopens bounds how often a sync opens its revision's folder again
// after a clean moved it away while the sync waited for its lock: a
// folder just made counts as just used, so a second move cannot follow.
const maxReopens = 3

// errMoved means the revision's folder was moved away (by a clean of
// another sync) between opening it and taking its lock.
var errMoved = errors.New("modelsync: the revision's folder was removed while waiting for its lock")

// markUsed stamps rev as used now. The caller holds rev's lock.
func markUsed(rev *os.Root, now time.Time) error {
	f, err := openFile(rev, usedName, os.O_CREATE|os.O_WRONLY)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("modelsync: %w", err)
	}
	if err := rev.Chtimes(usedName, now, now); err != nil {
		return fmt.Errorf("modelsync: %w", err)
	}
	return nil
}

// lastUsed is when rev was last used: its use stamp, else (a revision
// synced before stamps existed) its marker's time, else its folder's.
func lastUsed(rev *os.Root) (time.Time, error) {
	for _, name := range []string{usedName, MarkerName, "."} {
		fi, err := rev.Lstat(name)
		if err == nil {
			return fi.ModTime(), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return time.Time{}, fmt.Errorf("modelsync: %w", err)
		}
	}
	return time.Time{}, fmt.Errorf("modelsync: %s: no time of use", rev.Name())
}

// stillAt reports whether rev is still the folder at rel under cache:
// a clean moves a revision's folder away under its lock, and a sync that
// took the lock after it must not write into the folder being removed.
func stillAt(cache *os.Root, rel string, rev *os.Root) bool {
	fi, err := cache.Lstat(rel)
	if err != nil {
		return false
	}
	st, err := rev.Stat(".")
	return err == nil && os.SameFile(fi, st)
}

// clean removes the revisions of cfg.Model the node no longer needs,
// after cfg.Revision was synced: every revision but cfg.Revision, the
// KeepRevisions-1 others most recently used, and those used within
// KeepUnused. A revision whose lock another sync holds (copying it, or
// starting a pod on it) is left alone; one that is free is locked, looked
// at again, then moved to a trash name under the lock (so a sync waiting
// for that lock sees its folder gone and makes a new one) and removed. It
// returns the revisions removed; what it could not remove is logged, and
// tried again at the next sync.
func clean(cache *os.Root, cfg Config) []string {
	model, err := openDir(cache, cfg.Model, false)
	if err != nil {
		cfg.Logger.Warn("cannot clean old revisions", "model", cfg.Model, "err", err)
		return nil
	}
	defer model.Close()
	entries, err := fs.ReadDir(model.FS(), ".")
	if err != nil {
		cfg.Logger.Warn("cannot clean old revisions", "model", cfg.Model, "err", err)
		return nil
	}
	type revision struct {
		name string
		used time.Time
	}
	var others []revision
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, trashPrefix):
			if err := model.RemoveAll(name); err != nil {
				cfg.Logger.Warn("cannot remove a revision left half removed", "model", cfg.Model, "dir", name, "err", err)
			}
			continue
		case name == cfg.Revision, strings.HasPrefix(name, reservedPrefix), !e.IsDir():
			continue
		}
		rev, err := openChild(model, name, false)
		if err != nil {
			cfg.Logger.Warn("cannot look at an old revision", "model", cfg.Model, "revision", name, "err", err)
			continue
		}
		used, err := lastUsed(rev)
		rev.Close()
		if err != nil {
			cfg.Logger.Warn("cannot look at an old revision", "model", cfg.Model, "revision", name, "err", err)
			continue
		}
		others = append(others, revision{name, used})
	}
	slices.SortFunc(others, func(a, b revision) int { return b.used.Compare(a.used) })
	now := cfg.Clock.Now()
	var removed []string
	for i, r := range others {
		if i < cfg.KeepRevisions-1 || now.Sub(r.used) < cfg.KeepUnused {
			continue
		}
		ok, err := removeRevision(model, r.name, cfg, now)
		switch {
		case err != nil:
			cfg.Logger.Warn("cannot remove an old revision", "model", cfg.Model, "revision", r.name, "err", err)
		case ok:
			cfg.Logger.Info("removed an old revision", "model", cfg.Model, "revision", r.name, "last_used", r.used)
			removed = append(removed, r.name)
		default:
			cfg.Logger.Info("kept an old revision in use", "model", cfg.Model, "revision", r.name)
		}
	}
	return removed
}

// removeRevision removes the revision name of model unless a sync holds
// its lock or it was used within cfg.KeepUnused, and reports whether it
// did.
func removeRevision(model *os.Root, name string, cfg Config, now time.Time) (bool, error) {
	rev, err := openChild(model, name, false)
	if err != nil {
		return false, err
	}
	defer rev.Close()
	lock, err := openFile(rev, lockName, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return false, err
	}
	defer lock.Close()
	// Never wait: a holder is a sync copying this revision or starting a
	// pod on it, which keeps it.
	ok, err := tryLock(lock)
	if err != nil || !ok {
		return false, err
	}
	// Under the lock no sync uses the revision, and none can start to
	// without the lock: its stamp is final until the move.
	used, err := lastUsed(rev)
	if err != nil || now.Sub(used) < cfg.KeepUnused || !stillAt(model, name, rev) {
		return false, err
	}
	suffix := make([]byte, 8)
	if _, err := rand.Read(suffix); err != nil {
		return false, fmt.Errorf("modelsync: %w", err)
	}
	trash := trashPrefix + hex.EncodeToString(suffix)
	if err := model.Rename(name, trash); err != nil {
		return false, fmt.Errorf("modelsync: %w", err)
	}
	lock.Close() // the waiters, if any, now find their folder gone
	if err := model.RemoveAll(trash); err != nil {
		return true, fmt.Errorf("modelsync: %w", err)
	}
	return true, nil
}
