package quota

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// scriptCounter counts the scripts a client sends, pipelined or not.
type scriptCounter struct{ n atomic.Int64 }

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(cmd)
		return err
	}
}

func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.count(c)
		}
		return err
	}
}

// count counts a script that ran: a script the server did not have yet
// comes back NOSCRIPT and is sent again whole.
func (h *scriptCounter) count(cmd redis.Cmder) {
	if n := cmd.Name(); (n == "evalsha" || n == "eval") && !redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		h.n.Add(1)
	}
}

// TestLeaseAdmitsBusyKeyLocally: once a key was busy for a lease period,
// the Admit that goes to Redis takes tickets, the next requests are
// admitted on them without a round trip of their own, and each one's slot
// ends up under its request id, released as ever.
func TestLeaseAdmitsBusyKeyLocally(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	clock := testingclock.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, Clock: clock, LeaseTTL: time.Second})
	ctx := context.Background()
	lim := KeyLimits{MaxStreams: 100, RPM: 1000}
	admit := func(id string) AdmitDecision {
		t.Helper()
		d, err := l.Admit(ctx, "k_lease", id, lim)
		if err != nil || !d.Allowed {
			t.Fatalf("admit %s: %+v, %v", id, d, err)
		}
		return d
	}
	release := func(id string) {
		t.Helper()
		if err := l.ReleaseStream(ctx, "k_lease", id); err != nil {
			t.Fatalf("release %s: %v", id, err)
		}
	}
	// A first period of 8 arrivals, each to Redis.
	for i := range 8 {
		admit(fmt.Sprintf("r%d", i))
		release(fmt.Sprintf("r%d", i))
	}
	if n := rdb.ZCard(ctx, l.Keys().Streams("k_lease")).Val(); n != 0 {
		t.Fatalf("%d slots held after every release", n)
	}
	clock.Step(time.Second)
	// The next period's first Admit takes tickets for the 8 the last one saw.
	d := admit("lead")
	slots := rdb.ZCard(ctx, l.Keys().Streams("k_lease")).Val()
	if slots != 9 {
		t.Fatalf("after the leading admit the key holds %d slots, want the request's and 8 tickets", slots)
	}
	if d.ActiveStreams != 9 {
		t.Errorf("the leading admit reports %d active streams, want 9 (tickets count)", d.ActiveStreams)
	}
	if d.OnTicket {
		t.Error("the admit that went to Redis says it was on a ticket")
	}
	var counter scriptCounter
	rdb.AddHook(&counter)
	for i := range 8 {
		if d := admit(fmt.Sprintf("local%d", i)); !d.OnTicket || d.RPMRemaining < 1 {
			t.Errorf("local admit %d: %+v, want on a ticket with the minute's room", i, d)
		}
	}
	// Each local admission sends its claim, and nothing else.
	for i := range 8 {
		id := fmt.Sprintf("local%d", i)
		if err := l.leases.wait(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := rdb.ZScore(ctx, l.Keys().Streams("k_lease"), id).Result(); err != nil {
			t.Errorf("%s's slot is not under its id: %v", id, err)
		}
	}
	if got := counter.n.Load(); got != 8 {
		t.Errorf("8 admissions on tickets sent %d scripts, want their 8 claims", got)
	}
	if n := rdb.ZCard(ctx, l.Keys().Streams("k_lease")).Val(); n != slots {
		t.Errorf("claims changed the key's slots from %d to %d", slots, n)
	}
	// The tickets are used up: the next one goes to Redis again, and takes
	// the period's 8 again.
	before := counter.n.Load()
	admit("after")
	if got := counter.n.Load() - before; got != 1 {
		t.Errorf("the admit after the tickets sent %d scripts, want its own", got)
	}
	ids := []string{"lead", "after", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"}
	for _, id := range ids {
		release(id)
	}
	left := rdb.ZRange(ctx, l.Keys().Streams("k_lease"), 0, -1).Val()
	if len(left) != 8 {
		t.Errorf("after every release the key holds %v, want the 8 new tickets", left)
	}
	for _, m := range left {
		for _, id := range ids {
			if m == id {
				t.Errorf("%s's slot is held after its release", id)
			}
		}
	}
	// Every admission and ticket was counted in the minute: 8, 1 and its
	// 8 tickets, 1 and its 8.
	if n := rdb.ZCard(ctx, l.Keys().RPM("k_lease")).Val(); n != 26 {
		t.Errorf("the minute counted %d, want 26", n)
	}
	if got := l.leases.used.Load(); got != 8 {
		t.Errorf("%d admitted on tickets, want 8", got)
	}
}

// TestLeaseReleaseRightAfterAdmit: a slot given back at once (a request
// the ledger refused) is given back after its ticket's claim, never before
// it, which would leave the slot held until its deadline.
func TestLeaseReleaseRightAfterAdmit(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, LeaseTTL: time.Minute})
	ctx := context.Background()
	lim := KeyLimits{MaxStreams: 1000}
	// Lease periods are a minute here: make the last one busy by hand.
	kl := l.leases.lease("k_quick")
	kl.periodStart, kl.prevPeriod = time.Now().Add(-time.Minute), 0
	kl.arrivals = 64
	for i := range 200 {
		id := fmt.Sprintf("q%d", i)
		d, err := l.Admit(ctx, "k_quick", id, lim)
		if err != nil || !d.Allowed {
			t.Fatalf("admit %s: %+v, %v", id, d, err)
		}
		if err := l.ReleaseStream(ctx, "k_quick", id); err != nil {
			t.Fatal(err)
		}
		if _, err := rdb.ZScore(ctx, l.Keys().Streams("k_quick"), id).Result(); err != redis.Nil {
			t.Fatalf("%s's slot is held after its release (%v)", id, err)
		}
	}
	local := l.leases.used.Load()
	if local == 0 {
		t.Fatal("no admission used a ticket: the test shows nothing")
	}
	t.Logf("%d of 200 admitted on tickets", local)
}

// TestLeasesHoldLimitsAcrossReplicas is the limits' guarantee with tickets:
// two replicas admit one busy key concurrently, long enough for both to
// take tickets, and the key never has more streams open than max_streams
// nor more admissions in the minute than its rpm.
func TestLeasesHoldLimitsAcrossReplicas(t *testing.T) {
	const (
		maxStreams = 40
		rpm        = 3000
		workers    = 30 // per replica: more than the slots, so the limit refuses
	)
	env := testenv.Redis(t)
	rdb := env.Client()
	cfg := Config{Prefix: env.Prefix, LeaseTTL: 20 * time.Millisecond}
	replicas := []*Limiter{newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg)}
	ctx := context.Background()
	lim := KeyLimits{MaxStreams: maxStreams, RPM: rpm}
	var held, peak, allowed, refusedStreams, refusedRPM atomic.Int64
	var wg sync.WaitGroup
	for r, l := range replicas {
		for w := range workers {
			wg.Go(func() {
				for i := 0; ; i++ {
					id := fmt.Sprintf("r%d_w%d_%d", r, w, i)
					d, err := l.Admit(ctx, "k_two", id, lim)
					if err != nil {
						t.Errorf("admit %s: %v", id, err)
						return
					}
					switch d.Refused {
					case LimitRPM:
						refusedRPM.Add(1)
						return // the minute is full: this worker is done
					case LimitStreams:
						refusedStreams.Add(1)
						runtime.Gosched() // let a holder go
						continue
					}
					allowed.Add(1)
					raise(&peak, held.Add(1))
					runtime.Gosched() // a short stream: others run while it holds its slot
					held.Add(-1)
					if err := l.ReleaseStream(ctx, "k_two", id); err != nil {
						t.Errorf("release %s: %v", id, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if got := peak.Load(); got > maxStreams {
		t.Errorf("peak held %d streams, want <= %d", got, maxStreams)
	}
	if got := allowed.Load(); got > rpm {
		t.Errorf("admitted %d in the minute, want <= %d", got, rpm)
	}
	if n := rdb.ZCard(ctx, l0Keys(replicas).RPM("k_two")).Val(); n > rpm {
		t.Errorf("the minute holds %d entries, want <= %d", n, rpm)
	}
	onTickets := replicas[0].leases.used.Load() + replicas[1].leases.used.Load()
	if onTickets == 0 || refusedRPM.Load() == 0 {
		t.Errorf("admitted on tickets %d, refused by rpm %d: the test shows nothing", onTickets, refusedRPM.Load())
	}
	t.Logf("admitted %d (%d on tickets), refused by streams %d and by rpm %d, peak %d",
		allowed.Load(), onTickets, refusedStreams.Load(), refusedRPM.Load(), peak.Load())
}

func l0Keys(ls []*Limiter) Keys { return ls[0].Keys() }

// TestUnusedTicketsFreeTheirSlots: a replica that took tickets and then
// saw no more requests holds their slots only for the tickets' life.
func TestUnusedTicketsFreeTheirSlots(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, LeaseTTL: 10 * time.Millisecond})
	other := newLimiter(t, rdb, Config{Prefix: env.Prefix, NoLeases: true})
	ctx := context.Background()
	lim := KeyLimits{MaxStreams: 20}
	kl := l.leases.lease("k_idle")
	kl.periodStart, kl.arrivals = time.Now().Add(-10*time.Millisecond), 64
	d, err := l.Admit(ctx, "k_idle", "lead", lim)
	if err != nil || !d.Allowed {
		t.Fatalf("admit: %+v, %v", d, err)
	}
	if d.ActiveStreams <= 1 {
		t.Fatalf("the admit took no tickets (%d active)", d.ActiveStreams)
	}
	if err := l.ReleaseStream(ctx, "k_idle", "lead"); err != nil {
		t.Fatal(err)
	}
	// Until the tickets' life ends, the other replica finds fewer slots;
	// then it finds all of them.
	testenv.EventuallyNil(t, 30*time.Second, "the other replica to find every slot", func() error {
		var got []string
		for i := range lim.MaxStreams {
			id := fmt.Sprintf("o%d", i)
			d, err := other.Admit(ctx, "k_idle", id, lim)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				got = append(got, id)
			}
		}
		for _, id := range got {
			if err := other.ReleaseStream(ctx, "k_idle", id); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) != lim.MaxStreams {
			return fmt.Errorf("it finds %d of %d slots", len(got), lim.MaxStreams)
		}
		return nil
	})
}

// TestLeaseTicketsAreTakenOneAtATime: concurrent requests of a busy key
// that find no ticket left go to Redis together, but only one of them
// takes tickets; were each to, their leases would replace each other and
// the replaced tickets' slots would sit unused until their life ends,
// refusing requests the limit has room for.
func TestLeaseTicketsAreTakenOneAtATime(t *testing.T) {
	const (
		workers    = 32
		each       = 300
		maxStreams = 100 // above the workers' 32 with room for tickets
	)
	env := testenv.Redis(t)
	rdb := env.Client()
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix})
	ctx := context.Background()
	lim := KeyLimits{MaxStreams: maxStreams, RPM: 1_000_000}
	// The key was busy in the last lease period.
	kl := l.leases.lease("k_busy")
	kl.periodStart, kl.arrivals = time.Now().Add(-l.leases.ttl), 64
	var refused atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d_%d", w, i)
				d, err := l.Admit(ctx, "k_busy", id, lim)
				if err != nil {
					t.Errorf("admit %s: %v", id, err)
					return
				}
				if !d.Allowed {
					refused.Add(1)
					continue
				}
				if _, err := l.Finish(ctx, Finish{KeyID: "k_busy", RequestID: id, Release: true}); err != nil {
					t.Errorf("finish %s: %v", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := refused.Load(); n > 0 {
		t.Errorf("%d requests refused with at most %d of %d slots in use", n, workers, maxStreams)
	}
	if l.leases.used.Load() == 0 {
		t.Error("no request was admitted on a ticket: the test shows nothing")
	}
	// What is left is at most the last lease's unused tickets.
	if n := rdb.ZCard(ctx, l.Keys().Streams("k_busy")).Val(); n > maxTickets {
		t.Errorf("%d slots held after every finish, want at most one lease's tickets", n)
	}
	t.Logf("%d of %d admitted on tickets", l.leases.used.Load(), workers*each)
}

// TestIdleKeysLeaveTheLeaseTable: a replica keeps lease records only for
// the keys it saw lately.
func TestIdleKeysLeaveTheLeaseTable(t *testing.T) {
	env := testenv.Redis(t)
	clock := testingclock.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	l := newLimiter(t, env.Client(), Config{Prefix: env.Prefix, Clock: clock, LeaseTTL: time.Second})
	ctx := context.Background()
	records := func() (n int) {
		l.leases.keys.Range(func(any, any) bool { n++; return true })
		return n
	}
	for _, k := range []string{"k_a", "k_b", "k_c"} {
		if _, err := l.Admit(ctx, k, "r_"+k, KeyLimits{RPM: 100}); err != nil {
			t.Fatal(err)
		}
	}
	if n := records(); n != 3 {
		t.Fatalf("%d records after three keys, want 3", n)
	}
	clock.Step(5 * time.Second)
	if _, err := l.Admit(ctx, "k_a", "r_a2", KeyLimits{RPM: 100}); err != nil {
		t.Fatal(err)
	}
	if n := records(); n != 3 {
		t.Fatalf("%d records 5 s later, want all 3 kept", n)
	}
	clock.Step(7 * time.Second)
	if _, err := l.Admit(ctx, "k_d", "r_d", KeyLimits{RPM: 100}); err != nil {
		t.Fatal(err)
	}
	// k_b and k_c were last seen 12 s ago, past ten periods; k_a 7 s ago.
	for k, want := range map[string]bool{"k_a": true, "k_b": false, "k_c": false, "k_d": true} {
		if _, ok := l.leases.keys.Load(k); ok != want {
			t.Errorf("record of %s kept: %v, want %v", k, ok, want)
		}
	}
}
