package console

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/costreport"
)

// TestCostCache: within costCacheTTL of a computation the cache answers
// with it; at the TTL it computes again; a failure is not kept; a view
// waiting on a computation gives up with its context.
func TestCostCache(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	errDown := errors.New("ledger down")
	tests := []struct {
		name string
		// at are the views' times after t0; fail the views whose
		// computation fails.
		at        []time.Duration
		fail      map[int]bool
		wantRuns  int
		wantFirst []time.Duration // per view, when its report was computed after t0 (-1: an error)
	}{
		{"two views within the TTL compute once", []time.Duration{0, costCacheTTL - time.Nanosecond}, nil, 1,
			[]time.Duration{0, 0}},
		{"a view at the TTL computes again", []time.Duration{0, costCacheTTL}, nil, 2,
			[]time.Duration{0, costCacheTTL}},
		{"a failed computation is not kept", []time.Duration{0, time.Second, 2 * time.Second}, map[int]bool{0: true}, 2,
			[]time.Duration{-1, time.Second, time.Second}},
		{"a clock that went back computes again", []time.Duration{time.Minute / 2, 0}, nil, 2,
			[]time.Duration{time.Minute / 2, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCostCache()
			runs := 0
			for i, d := range tt.at {
				r, computed, err := c.get(context.Background(), t0.Add(d), func(_ context.Context, now time.Time) (costreport.Report, error) {
					runs++
					if tt.fail[i] {
						return costreport.Report{}, errDown
					}
					return costreport.Report{Total: costreport.ModelReport{Requests: int64(runs)}, To: now}, nil
				})
				want := tt.wantFirst[i]
				switch {
				case want < 0 && !errors.Is(err, errDown):
					t.Errorf("view %d: err %v, want the computation's", i, err)
				case want >= 0 && (err != nil || !computed.Equal(t0.Add(want)) || !r.To.Equal(computed)):
					t.Errorf("view %d at +%v: report to %v computed %v (err %v), want computed at +%v", i, d, r.To, computed, err, want)
				}
			}
			if runs != tt.wantRuns {
				t.Errorf("%d computations, want %d", runs, tt.wantRuns)
			}
		})
	}
	t.Run("a view waiting on a computation gives up with its context", func(t *testing.T) {
		c := newCostCache()
		started, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1) // the first view's result, read once
		go func() {
			_, _, err := c.get(context.Background(), t0, func(context.Context, time.Time) (costreport.Report, error) {
				close(started)
				<-release
				return costreport.Report{}, nil
			})
			done <- err
		}()
		<-started
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := c.get(ctx, t0, func(context.Context, time.Time) (costreport.Report, error) {
			t.Error("a second computation ran while the first held the cache")
			return costreport.Report{}, nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("waiting view: %v, want its context's end", err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Errorf("first view: %v", err)
		}
	})
	t.Run("a computation outlives the view that started it and serves the next", func(t *testing.T) {
		c := newCostCache()
		release := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		var computeCtx context.Context
		computed := make(chan struct{})
		waiting := make(chan error, 1)
		go func() {
			_, _, err := c.get(ctx, t0, func(cctx context.Context, now time.Time) (costreport.Report, error) {
				computeCtx = cctx
				<-release
				defer close(computed)
				return costreport.Report{To: now}, nil
			})
			waiting <- err
		}()
		cancel() // the page's budget ends while the report is computed
		if err := <-waiting; !errors.Is(err, context.Canceled) {
			t.Fatalf("the view whose budget ended: %v, want its context's end", err)
		}
		close(release)
		<-computed
		if computeCtx.Err() != nil {
			t.Errorf("the computation's context ended with the view's: %v", computeCtx.Err())
		}
		r, at, err := c.get(context.Background(), t0.Add(time.Second), func(context.Context, time.Time) (costreport.Report, error) {
			t.Error("the next view computed again")
			return costreport.Report{}, nil
		})
		if err != nil || !at.Equal(t0) || !r.To.Equal(t0) {
			t.Errorf("the next view: report to %v computed %v (%v), want the one computed at t0", r.To, at, err)
		}
	})
}
