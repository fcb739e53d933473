package quota

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// miniEnv is the local mode's embedded server with a hand-driven clock:
// advance moves both the time TIME returns (SetTime) and the TTLs
// (FastForward), as the local mode's ticker moves the TTLs in step with the
// wall clock.
type miniEnv struct {
	m   *miniredis.Miniredis
	rdb *redis.Client
	now time.Time
}

func newMiniEnv(t *testing.T) *miniEnv {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	e := &miniEnv{m: m, rdb: rdb, now: time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)}
	m.SetTime(e.now)
	return e
}

func (e *miniEnv) advance(d time.Duration) {
	e.now = e.now.Add(d)
	e.m.SetTime(e.now)
	e.m.FastForward(d)
}

func TestMiniredisStreamSlots(t *testing.T) {
	e := newMiniEnv(t)
	l := newLimiter(t, e.rdb, Config{Prefix: "llmplat:", MaxStreamDuration: 10 * time.Minute, NoLeases: true})
	ctx := context.Background()
	acquire := func(rid string) AdmitDecision {
		t.Helper()
		d, err := l.Admit(ctx, "k", rid, KeyLimits{MaxStreams: 1})
		if err != nil {
			t.Fatalf("acquire %s: %v", rid, err)
		}
		return d
	}
	if d := acquire("req_crashed"); !d.Allowed {
		t.Fatalf("first acquire refused: %+v", d)
	}
	if d := acquire("req_b"); d.Allowed || d.RetryAfter != streamRetryHint {
		t.Errorf("second acquire = %+v, want refused with RetryAfter %v", d, streamRetryHint)
	}
	e.advance(10*time.Minute - 300*time.Millisecond)
	if d := acquire("req_b"); d.Allowed || d.RetryAfter != 300*time.Millisecond {
		t.Errorf("300 ms before the deadline = %+v, want refused with RetryAfter 300ms (the slot's deadline)", d)
	}
	e.advance(300 * time.Millisecond)
	if d := acquire("req_b"); !d.Allowed || d.ActiveStreams != 1 {
		t.Errorf("at the crashed slot's deadline = %+v, want allowed with 1 active", d)
	}
	e.advance(10*time.Minute + time.Millisecond)
	if n := e.rdb.Exists(ctx, l.Keys().Streams("k")).Val(); n != 0 {
		t.Errorf("the key outlived its TTL backstop")
	}
}

func TestMiniredisRateWindowSlides(t *testing.T) {
	e := newMiniEnv(t)
	l := newLimiter(t, e.rdb, Config{Prefix: "llmplat:", NoLeases: true})
	ctx := context.Background()
	refused := func(after time.Duration) AdmitDecision {
		return AdmitDecision{Refused: LimitRPM, RetryAfter: after}
	}
	steps := []struct {
		name    string
		advance time.Duration
		want    AdmitDecision
	}{
		{"first", 0, AdmitDecision{Allowed: true, RPMRemaining: 1}},
		{"second, 20 s later", 20 * time.Second, AdmitDecision{Allowed: true, RPMRemaining: 0}},
		{"third at 30 s waits for the first to leave", 10 * time.Second, refused(30 * time.Second)},
		{"at 59.999 s the first still counts", 29999 * time.Millisecond, refused(time.Millisecond)},
		{"at 60 s the first has left", time.Millisecond, AdmitDecision{Allowed: true, RPMRemaining: 0}},
		{"at 61 s the second leaves at 80 s", time.Second, refused(19 * time.Second)},
		{"at 80 s the second has left", 19 * time.Second, AdmitDecision{Allowed: true, RPMRemaining: 0}},
	}
	for i, s := range steps {
		e.advance(s.advance)
		got, err := l.Admit(ctx, "k", fmt.Sprintf("req_%d", i), KeyLimits{RPM: 2})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got != s.want {
			t.Errorf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
}

func TestMiniredisTokensDayExpires(t *testing.T) {
	e := newMiniEnv(t)
	clock := testingclock.NewFakeClock(e.now)
	l := newLimiter(t, e.rdb, Config{Prefix: "llmplat:", Clock: clock, NoLeases: true})
	ctx := context.Background()
	if _, err := l.CountTokens(ctx, "k", "req_done", 1000); err != nil {
		t.Fatal(err)
	}
	if d, err := l.Admit(ctx, "k", "req_next", KeyLimits{TokensPerDay: 1000}); err != nil || d.Allowed || d.RetryAfter != 12*time.Hour {
		t.Errorf("at the limit at noon: %+v, %v; want refused for 12h", d, err)
	}
	key := l.Keys().TokensPerDay("k", clock.Now())
	e.advance(36*time.Hour - time.Second) // 48 h after the day's start, less a second
	if !e.m.Exists(key) {
		t.Errorf("%s expired before 48 h from its day's start", key)
	}
	e.advance(time.Second)
	if e.m.Exists(key) {
		t.Errorf("%s outlived 48 h from its day's start", key)
	}
}

func TestMiniredisQueue(t *testing.T) {
	e := newMiniEnv(t)
	q := newQueue(t, e.rdb, Config{Prefix: "llmplat:", QueuePollInterval: slowPoll})
	ctx := context.Background()

	var open = make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- q.Wait(ctx, "m", "req_w", 10*time.Second, func(context.Context) (bool, error) {
			select {
			case <-open:
				return true, nil
			default:
				return false, nil
			}
		})
	}()
	testenv.Eventually(t, "one waiter", func() bool {
		n, err := q.Depth(ctx, "m")
		return err == nil && n == 1
	})
	close(open)
	if err := q.Notify(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait = %v", err)
		}
	case <-time.After(slowPoll / 2):
		t.Fatal("Notify did not wake the waiter")
	}

	if _, err := q.enqueue(ctx, "m", "req_crashed", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	e.advance(30 * time.Second)
	if n, err := q.Depth(ctx, "m"); err != nil || n != 0 {
		t.Errorf("Depth after the crashed entry's limit = %d, %v; want 0", n, err)
	}
	e.advance(time.Millisecond)
	for _, k := range []string{q.keys.Queue("m"), q.keys.QueueSeq("m")} {
		if e.m.Exists(k) {
			t.Errorf("%s outlived its last entry", k)
		}
	}

	err := q.Wait(ctx, "m", "req_late", 50*time.Millisecond, never)
	if !errors.Is(err, ErrQueueTimeout) {
		t.Errorf("Wait = %v, want ErrQueueTimeout", err)
	}
}

// TestMiniredisWallClock runs the local mode's setup: miniredis's TIME is
// the wall clock and nobody calls SetTime, so slot deadlines and the rate
// window follow real time while the TTLs wait for FastForward.
func TestMiniredisWallClock(t *testing.T) {
	const life = 200 * time.Millisecond
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	l := newLimiter(t, rdb, Config{Prefix: "llmplat:", MaxStreamDuration: life, NoLeases: true})
	l.window = life
	ctx := context.Background()
	admit := func(key, rid string, lim KeyLimits) AdmitDecision {
		t.Helper()
		d, err := l.Admit(ctx, key, rid, lim)
		if err != nil {
			t.Fatalf("admit %s: %v", rid, err)
		}
		return d
	}
	slot, minute := KeyLimits{MaxStreams: 1}, KeyLimits{RPM: 1}
	if d := admit("k", "req_crashed", slot); !d.Allowed {
		t.Fatalf("first slot: %+v", d)
	}
	if d := admit("k_rpm", "req_1", minute); !d.Allowed {
		t.Fatalf("first in the minute: %+v", d)
	}
	if d := admit("k_rpm", "req_2", minute); d.Allowed {
		t.Fatalf("over the minute's limit: %+v; want refused", d)
	}
	time.Sleep(life + 20*time.Millisecond) // no FastForward: the keys' TTLs have not moved
	if d := admit("k", "req_b", slot); !d.Allowed {
		t.Errorf("a slot after the crashed slot's deadline: %+v; want allowed", d)
	}
	if d := admit("k_rpm", "req_3", minute); !d.Allowed {
		t.Errorf("after the window: %+v; want allowed", d)
	}
}
