package modelsync

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestOpenFileRacingCreators: syncs of one revision that start together
// all find its lock file missing and all create it; every one must get
// the file (the one that made it, or the one another made), never
// "file exists". Many rounds of eight openers make the race likely.
func TestOpenFileRacingCreators(t *testing.T) {
	for round := range 200 {
		dir := filepath.Join(t.TempDir(), fmt.Sprint(round))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		r, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		start := make(chan struct{})
		for range 8 {
			wg.Go(func() {
				<-start
				f, err := openFile(r, LockName, os.O_RDWR|os.O_CREATE)
				if err != nil {
					errs <- err
					return
				}
				f.Close()
			})
		}
		close(start)
		wg.Wait()
		r.Close()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: an opener of a file others were creating failed: %v", round, err)
		}
	}
}
