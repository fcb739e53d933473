package quota

import (
	"context"
	"strconv"
	"testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// BenchmarkAcquireRelease is one stream slot's admission and release on a
// real server: two round trips (EVALSHA, ZREM).
func BenchmarkAcquireRelease(b *testing.B) {
	env := testenv.Redis(b)
	l := newLimiter(b, env.Client(), Config{Prefix: env.Prefix})
	ctx := context.Background()
	i := 0
	for b.Loop() {
		rid := "req_" + strconv.Itoa(i)
		i++
		d, err := l.AcquireStream(ctx, "k", rid, 64)
		if err != nil || !d.Allowed {
			b.Fatalf("acquire: %+v, %v", d, err)
		}
		if err := l.ReleaseStream(ctx, "k", rid); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllowRequest is one rate check on a real server: one round trip
// (EVALSHA). Every request is admitted, the costlier path (it writes).
func BenchmarkAllowRequest(b *testing.B) {
	env := testenv.Redis(b)
	l := newLimiter(b, env.Client(), Config{Prefix: env.Prefix})
	ctx := context.Background()
	for b.Loop() {
		d, err := l.AllowRequest(ctx, "k", 1<<30)
		if err != nil || !d.Allowed {
			b.Fatalf("allow: %+v, %v", d, err)
		}
	}
}

// BenchmarkCheckTokens is the tokens-per-day check: one GET.
func BenchmarkCheckTokens(b *testing.B) {
	env := testenv.Redis(b)
	l := newLimiter(b, env.Client(), Config{Prefix: env.Prefix})
	ctx := context.Background()
	for b.Loop() {
		if _, err := l.CheckTokens(ctx, "k", 1<<40); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRedisPing is one bare round trip on the same server, the unit
// the benchmarks above are measured in.
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
// the slot released after: Admit (one EVALSHA) and ReleaseStream, against
// AcquireStream, CheckTokens and AllowRequest one by one.
func BenchmarkAdmit(b *testing.B) {
	env := testenv.Redis(b)
	l := newLimiter(b, env.Client(), Config{Prefix: env.Prefix})
	ctx := context.Background()
	lim := KeyLimits{MaxStreams: 64, TokensPerDay: 1 << 40, RPM: 1 << 30}
	i := 0
	b.Run("one-script", func(b *testing.B) {
		for b.Loop() {
			rid := "req_" + strconv.Itoa(i)
			i++
			if d, err := l.Admit(ctx, "k", rid, lim); err != nil || !d.Allowed {
				b.Fatalf("admit: %+v, %v", d, err)
			}
			if err := l.ReleaseStream(ctx, "k", rid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("three-calls", func(b *testing.B) {
		for b.Loop() {
			rid := "req_" + strconv.Itoa(i)
			i++
			if d, err := l.AcquireStream(ctx, "k", rid, lim.MaxStreams); err != nil || !d.Allowed {
				b.Fatalf("acquire: %+v, %v", d, err)
			}
			if _, err := l.CheckTokens(ctx, "k", lim.TokensPerDay); err != nil {
				b.Fatal(err)
			}
			if d, err := l.AllowRequest(ctx, "k", lim.RPM); err != nil || !d.Allowed {
				b.Fatalf("allow: %+v, %v", d, err)
			}
			if err := l.ReleaseStream(ctx, "k", rid); err != nil {
				b.Fatal(err)
			}
		}
	})
}
