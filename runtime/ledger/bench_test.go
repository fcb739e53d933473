package ledger

import (
	"context"
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
