package settlelog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
	testingclock "k8s.io/utils/clock/testing"
)

// downLedger refuses every settle, as a database that is down.
type downLedger struct{}

func (downLedger) Settle(context.Context, string, ledger.Usage, ledger.Source) (ledger.Outcome, error) {
	return ledger.Outcome{}, errors.New("database down")
}

// TestKeepAndReplay: kept settles wait while the database refuses them,
// then are applied once, oldest first, told to onSettled and forgotten.
func TestKeepAndReplay(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	led, err := ledger.New(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO models (name, served_name, prompt_price_micro_per_mtok,
		completion_price_micro_per_mtok, max_context_tokens, max_output_tokens) VALUES ('m', 'm', 1000000, 1000000, 8192, 4096)`); err != nil {
		t.Fatal(err)
	}
	var team int64
	if err := db.QueryRowContext(ctx, "INSERT INTO teams (name) VALUES ('a') RETURNING id").Scan(&team); err != nil {
		t.Fatal(err)
	}
	if _, err := led.AddCredit(ctx, team, "g1", 1_000_000, ""); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"req_1", "req_2"} {
		if _, err := led.Reserve(ctx, ledger.Reservation{RequestID: id, TeamID: team, Model: "m", PromptTokens: 10, MaxOutputTokens: 10}); err != nil {
			t.Fatal(err)
		}
	}
	env := testenv.Redis(t)
	log := New(env.Client(), env.Prefix, nil)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	log.clock = clk
	u1, u2 := ledger.Usage{PromptTokens: 10, CompletionTokens: 7}, ledger.Usage{PromptTokens: 9, CompletionTokens: 3}
	// A kept cancel of a reservation that never committed: its row does
	// not exist, and the replay drops it instead of stopping at it.
	if err := log.Keep(ctx, "req_0", ledger.Usage{}, ledger.SourcePartial); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second) // a replay takes kept settles in the order they were kept
	if err := log.Keep(ctx, "req_1", u1, ledger.SourceExact); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	if err := log.Keep(ctx, "req_2", u2, ledger.SourcePartial); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := log.Completion(ctx, "req_1"); err != nil || !ok || got != u1 {
		t.Fatalf("Completion = %+v, %v, %v; want the kept usage", got, ok, err)
	}
	if n, err := log.Replay(ctx, downLedger{}, nil); err == nil || n != 0 {
		t.Fatalf("Replay with the database down = %d, %v; want an error and nothing forgotten", n, err)
	}
	var told []string
	n, err := log.Replay(ctx, led, func(_ context.Context, o ledger.Outcome) { told = append(told, o.RequestID) })
	if err != nil || n != 3 {
		t.Fatalf("Replay = %d, %v; want the unknown row dropped and both settles applied", n, err)
	}
	if len(told) != 2 || told[0] != "req_1" || told[1] != "req_2" {
		t.Errorf("told %v, want req_1 then req_2", told)
	}
	if _, ok, _ := log.Completion(ctx, "req_1"); ok {
		t.Error("an applied settle is still kept")
	}
	if n, err := log.Replay(ctx, led, nil); err != nil || n != 0 {
		t.Errorf("second Replay = %d, %v; want nothing", n, err)
	}
	for id, u := range map[string]ledger.Usage{"req_1": u1, "req_2": u2} {
		out, err := led.Settle(ctx, id, ledger.Usage{}, ledger.SourceExact) // reads the row back
		if err != nil || out.Applied || out.Usage != u {
			t.Errorf("%s = %+v, %v; want settled once with %+v", id, out, err, u)
		}
	}
}
