package devmode

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"golang.org/x/sync/errgroup"
)

// redisTick is how often the embedded Redis's clock moves: miniredis only
// expires keys when told time passed, and the platform's TTLs (15 s node
// records, 60 s rate windows) need second resolution at most.
const redisTick = time.Second

// startRedis runs an in-process Redis-protocol server on a loopback port
// and a ticker that moves its TTL clock; both stop when ctx ends.
func startRedis(ctx context.Context, g *errgroup.Group) (string, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return "", fmt.Errorf("embedded redis: %w", err)
	}
	g.Go(func() error {
		defer m.Close()
		t := time.NewTicker(redisTick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				m.FastForward(redisTick)
			}
		}
	})
	return m.Addr(), nil
}
