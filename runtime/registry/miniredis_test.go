package registry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestMiniredisLifecycle runs the registry on the local mode's embedded
// server, whose clock is driven by hand: SetTime moves what TIME returns
// and FastForward moves the TTLs, as the local mode's ticker does. It
// covers what the scripts need from the server there (ZADD GT, TIME,
// unpack, PX), not concurrency, which only the real server can show.
func TestMiniredisLifecycle(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	now := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	advance := func(d time.Duration) {
		now = now.Add(d)
		m.SetTime(now)
		m.FastForward(d)
	}
	advance(0)
	r, err := New(rdb, Config{Prefix: "llmplat:"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d := &deaths{}
	w := watcher{r: r, seen: map[string]struct{}{}, onDead: d.report}

	ea := mustRegister(t, r, onPrem("n1", "orch-a", "llama-8b"))
	eb := mustRegister(t, r, onPrem("n1", "orch-b", "llama-8b"))
	if ok, err := r.Heartbeat(ctx, "n1", ea, Heartbeat{}); err != nil || ok {
		t.Errorf("stale beat = %v, %v; want refused", ok, err)
	}
	advance(10 * time.Second)
	if ok, err := r.Heartbeat(ctx, "n1", eb, Heartbeat{GPUUtil: ptr(0.0)}); err != nil || !ok {
		t.Fatalf("beat = %v, %v; want accepted", ok, err)
	}
	if err := w.poll(ctx); err != nil {
		t.Fatal(err)
	}
	advance(10 * time.Second) // 20 s after registering, 10 s after the beat
	n, err := r.Get(ctx, "n1")
	if err != nil || n.Owner != "orch-b" || n.GPUUtil == nil || !n.LastSeen.Equal(now.Add(-10*time.Second)) {
		t.Fatalf("Get = %+v, %v; want orch-b's record beat 10 s ago", n, err)
	}
	advance(DefaultTTL)
	if err := w.poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d.get(); len(got) != 1 || got[0].id != "n1" || got[0].epoch != eb {
		t.Errorf("reports %+v, want one for n1 epoch %d", got, eb)
	}
	if _, err := r.Get(ctx, "n1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after the TTL = %v, want ErrNotFound", err)
	}

	// The embedded server's clock is far from the wall clock: the first
	// attempt names the wrong second and the retry the right one.
	for i := range 3 {
		ok, wait, err := r.AllowRegistration(ctx, 2)
		if err != nil || ok != (i < 2) || (wait > 0) == ok {
			t.Errorf("attempt %d = %v, %v, %v; want allowed for the first two, then a wait", i, ok, wait, err)
		}
	}
}
