package modelsync

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/utils/clock"
)

// lockName is the revision's lock file. It starts with reservedPrefix,
// which no key may map to, so no object can take or replace it. It is
// left in place after the copy: removing a lock file lets a waiter lock
// a name that a newcomer then makes again.
const lockName = reservedPrefix + "lock"

// lockPoll is how often a sync waiting for another's lock tries again: a
// copy takes minutes, so a waiter that learns of its end within a quarter
// of a second loses nothing, and a context cancelled meanwhile is seen as
// soon.
const lockPoll = 250 * time.Millisecond

// lockRevision takes rev's lock, waiting while another sync of the same
// revision holds it: a goroutine, another process, or another pod on the
// node (the lock is on the file, which every pod's mount of the cache
// shares). Closing the returned file releases the lock, and so does the
// end of the process, however it ends, so a crashed sync never leaves
// the revision locked.
func lockRevision(ctx context.Context, rev *os.Root, clk clock.WithTicker, log *slog.Logger, dir string) (*os.File, error) {
	f, err := openFile(rev, lockName, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return nil, err
	}
	t := clk.NewTicker(lockPoll)
	defer t.Stop()
	waited := false
	for {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("modelsync: lock %s: %w", dir, err)
		}
		if ok {
			return f, nil
		}
		if !waited {
			waited = true
			log.Info("another modelsync is copying this revision; waiting for it", "dir", dir)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("modelsync: waiting for the lock on %s: %w", dir, context.Cause(ctx))
		case <-t.C():
		}
	}
}
