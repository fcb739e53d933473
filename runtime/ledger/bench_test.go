package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// benchParallelism is how many callers per GOMAXPROCS the parallel
// benchmarks run: a gateway reserves for many requests at once, and a
// batch only forms when calls wait together.
const benchParallelism = 16

// BenchmarkReserveSettle measures one request's two ledger calls on a
// PostgreSQL that commits as production does: a reserve and its exact
// settle, one caller at a time (each call its own batch) and many at once
// (batched).
func BenchmarkReserveSettle(b *testing.B) {
	ctx := context.Background()
	f := newFixture(b, testenv.DurablePostgres(b))
	team := f.team(b, "bench", 1_000_000_000_000)
	u := Usage{PromptTokens: 900, CompletionTokens: 300}
	var next atomic.Int64
	one := func(b *testing.B) {
		id := strconv.FormatInt(next.Add(1), 10)
		if _, err := f.l.Reserve(ctx, req(id, team)); err != nil {
			b.Fatal(err)
		}
		if out, err := f.l.Settle(ctx, id, u, SourceExact); err != nil || !out.Applied {
			b.Fatalf("Settle = %+v, %v", out, err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			one(b)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(benchParallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one(b)
			}
		})
	})
	reportUpdates(b, f, next.Load())
}

// statsWait bounds reportUpdates' wait for PostgreSQL's statistics, which
// backends publish at most about once a second and when they exit.
const statsWait = 30 * time.Second

// reportUpdates logs how the benchmark's row updates went on PostgreSQL:
// of usage_ledger's and teams' updates, how many were HOT (the new
// version on the same page, no index entry added), and the dead versions
// left. It closes the pool's connections first, so that their backends
// publish their counts, and waits until the inserts of all rows reserved
// are counted.
func reportUpdates(b *testing.B, f *fixture, reserved int64) {
	b.Helper()
	f.db.SetMaxIdleConns(0)
	f.db.SetMaxIdleConns(2)
	deadline := time.Now().Add(statsWait)
	for {
		rows, err := f.db.Query(`SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_dead_tup
			FROM pg_stat_user_tables WHERE relname IN ('usage_ledger', 'teams') ORDER BY relname`)
		if err != nil {
			b.Fatal(err)
		}
		var lines []string
		var ledgerIns int64
		for rows.Next() {
			var name string
			var ins, upd, hot, dead int64
			if err := rows.Scan(&name, &ins, &upd, &hot, &dead); err != nil {
				b.Fatal(err)
			}
			if name == "usage_ledger" {
				ledgerIns = ins
			}
			lines = append(lines, fmt.Sprintf("%s: %d updates, %d HOT, %d dead versions", name, upd, hot, dead))
		}
		if err := rows.Close(); err != nil {
			b.Fatal(err)
		}
		if ledgerIns >= reserved || time.Now().After(deadline) {
			b.Logf("%d rows reserved and settled; %s", reserved, strings.Join(lines, "; "))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkReserve compares a reservation's two paths on PostgreSQL: the
// batch (as Reserve takes it, alone and with concurrent callers) and the
// transaction it falls back to.
func BenchmarkReserve(b *testing.B) {
	ctx := context.Background()
	f := newFixture(b, testenv.Postgres(b))
	team := f.team(b, "bench", 1_000_000_000_000)
	var next atomic.Int64
	id := func(prefix string) string { return prefix + strconv.FormatInt(next.Add(1), 10) }
	b.Run("batch", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.l.Reserve(ctx, req(id("b"), team)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("batch-parallel", func(b *testing.B) {
		b.SetParallelism(benchParallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := f.l.Reserve(ctx, req(id("p"), team)); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("transaction", func(b *testing.B) {
		for b.Loop() {
			err := f.db.InTx(ctx, func(tx *sql.Tx) error {
				_, err := f.l.reserveTx(ctx, tx, req(id("t"), team))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkQuote measures Quote, which the gateway calls on every request
// before it reserves, from many callers at once.
func BenchmarkQuote(b *testing.B) {
	ctx := context.Background()
	f := newFixture(b, testenv.Postgres(b))
	team := f.team(b, "bench", 1_000_000)
	l, err := New(f.db, Config{}) // the real clock, as in production: terms reload every quoteTermsTTL
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Quote(ctx, req("warm", team)); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := req("q", team)
		for pb.Next() {
			if _, err := l.Quote(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
