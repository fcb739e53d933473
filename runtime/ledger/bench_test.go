package ledger

import (
	"context"
	"database/sql"
	"strconv"
	"testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// BenchmarkReserveSettle measures one request's two ledger transactions on
// PostgreSQL: a reserve and its exact settle.
func BenchmarkReserveSettle(b *testing.B) {
	ctx := context.Background()
	f := newFixture(b, testenv.Postgres(b))
	team := f.team(b, "bench", 1_000_000_000_000)
	u := Usage{PromptTokens: 900, CompletionTokens: 300}
	i := 0
	for b.Loop() {
		id := strconv.Itoa(i)
		i++
		if _, err := f.l.Reserve(ctx, req(id, team)); err != nil {
			b.Fatal(err)
		}
		if out, err := f.l.Settle(ctx, id, u, SourceExact); err != nil || !out.Applied {
			b.Fatalf("Settle = %+v, %v", out, err)
		}
	}
}

// BenchmarkReserve compares a reservation's two paths on PostgreSQL: the
// one-statement path Reserve takes for a common request, and the
// transaction it falls back to.
func BenchmarkReserve(b *testing.B) {
	ctx := context.Background()
	f := newFixture(b, testenv.Postgres(b))
	team := f.team(b, "bench", 1_000_000_000_000)
	i := 0
	b.Run("one-statement", func(b *testing.B) {
		for b.Loop() {
			i++
			if _, ok, err := f.l.reserveFast(ctx, req("f"+strconv.Itoa(i), team)); err != nil || !ok {
				b.Fatalf("reserveFast: %v, %v", ok, err)
			}
		}
	})
	b.Run("transaction", func(b *testing.B) {
		for b.Loop() {
			i++
			err := f.db.InTx(ctx, func(tx *sql.Tx) error {
				_, err := f.l.reserveTx(ctx, tx, req("t"+strconv.Itoa(i), team))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
