package devmode

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// redisTick is how often the embedded Redis's clock moves: miniredis only
// expires keys when told time passed, and the platform's TTLs (15 s node
// records, 60 s rate windows) need second resolution at most.
const redisTick = time.Second

// startRedis runs an in-process Redis-protocol server on a loopback port
// and a ticker that moves its TTL clock, until stop is called. It outlives
// the platform's own parts, which use it until they have stopped: the
// orchestrator releases its node records there on the way out.
func startRedis() (addr string, stop func(), err error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return "", nil, fmt.Errorf("embedded redis: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(redisTick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				m.FastForward(redisTick)
			}
		}
	}()
	stop = func() {
		cancel()
		<-ticked
		m.Close()
	}
	return m.Addr(), stop, nil
}
