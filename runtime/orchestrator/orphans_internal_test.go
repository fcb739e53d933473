package orchestrator

import (
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestOrphanRepliesCancelOnce: the first stray reply of an attempt sends a
// cancel and the next ones within orphanMemory do not; after it, or for
// another attempt of the same request, one does again; and a flood of
// orphans is remembered up to orphansRemembered, never more.
func TestOrphanRepliesCancelOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	o := &Orchestrator{orphans: cache.NewLRUExpireCacheWithClock(orphansRemembered, clk)}
	if !o.firstOrphanReply("req-1", 1) {
		t.Fatal("the first stray reply of an attempt did not send a cancel")
	}
	if o.firstOrphanReply("req-1", 1) {
		t.Fatal("a second stray reply of the same attempt sent another cancel")
	}
	if !o.firstOrphanReply("req-1", 2) {
		t.Fatal("another attempt of the same request is a new orphan")
	}
	clk.Step(orphanMemory + time.Millisecond)
	if !o.firstOrphanReply("req-1", 1) {
		t.Fatal("an orphan is still remembered after orphanMemory")
	}
	for i := range 3 * orphansRemembered {
		o.firstOrphanReply("flood-"+strconv.Itoa(i), 1)
	}
	if n := len(o.orphans.Keys()); n != orphansRemembered {
		t.Fatalf("%d orphans remembered after a flood, want the bound %d", n, orphansRemembered)
	}
}
