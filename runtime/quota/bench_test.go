package quota

import (
	"context"
	"strconv"
	"testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// BenchmarkRedisPing is one bare round trip on the same server, the unit
// the benchmarks below are measured in.
func BenchmarkRedisPing(b *testing.B) {
	rdb := testenv.Redis(b).Client()
	ctx := context.Background()
	for b.Loop() {
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdmit is a key's three limits checked the gateway's way, with
// the slot given back after: Admit (one EVALSHA, or a ticket) and Finish.
// Tickets are off in "round-trip", so every Admit goes to Redis.
func BenchmarkAdmit(b *testing.B) {
	env := testenv.Redis(b)
	lim := KeyLimits{MaxStreams: 64, TokensPerDay: 1 << 40, RPM: 1 << 30}
	ctx := context.Background()
	for _, bc := range []struct {
		name     string
		noLeases bool
	}{{"round-trip", true}, {"with-tickets", false}} {
		b.Run(bc.name, func(b *testing.B) {
			l := newLimiter(b, env.Client(), Config{Prefix: env.Prefix + bc.name + ":", NoLeases: bc.noLeases})
			i := 0
			for b.Loop() {
				rid := "req_" + strconv.Itoa(i)
				i++
				if d, err := l.Admit(ctx, "k", rid, lim); err != nil || !d.Allowed {
					b.Fatalf("admit: %+v, %v", d, err)
				}
				if _, err := l.Finish(ctx, Finish{KeyID: "k", RequestID: rid, Release: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
