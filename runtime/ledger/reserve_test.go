package ledger

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

func TestReserveClampsOutput(t *testing.T) {
	tests := []struct {
		name           string
		prompt, asked  int64
		wantMaxOut     int64
		wantContextErr bool
	}{
		{name: "unset takes the model's max", prompt: 1000, wantMaxOut: m8bMaxOut},
		{name: "asked below the max", prompt: 1000, asked: 100, wantMaxOut: 100},
		{name: "asked above the max", prompt: 1000, asked: 10_000, wantMaxOut: m8bMaxOut},
		{name: "unset, prompt leaves less room", prompt: 6000, wantMaxOut: m8bContext - 6000},
		{name: "asked more than the room", prompt: 6000, asked: 3000, wantMaxOut: m8bContext - 6000},
		{name: "room for one token", prompt: m8bContext - 1, asked: 50, wantMaxOut: 1},
		{name: "prompt fills the context", prompt: m8bContext, wantContextErr: true},
		{name: "prompt beyond the context", prompt: m8bContext + 500, asked: 10, wantContextErr: true},
	}
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 1_000_000_000)
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := Reservation{RequestID: fmt.Sprint("clamp-", i), TeamID: team, Model: m8b,
					PromptTokens: tt.prompt, MaxOutputTokens: tt.asked}
				got, err := f.l.Reserve(context.Background(), r)
				if tt.wantContextErr {
					wantErr(t, "Reserve", err, ErrContextTooLong)
					return
				}
				if err != nil {
					t.Fatalf("Reserve: %v", err)
				}
				if got.MaxOutputTokens != tt.wantMaxOut {
					t.Errorf("MaxOutputTokens = %d, want %d", got.MaxOutputTokens, tt.wantMaxOut)
				}
				if want := Cost(tt.prompt, tt.wantMaxOut, m8bPrompt, m8bOut); got.Microcredits != want {
					t.Errorf("Microcredits = %d, want %d", got.Microcredits, want)
				}
			})
		}
		f.checkBooks(t)
	})
}

func TestReserveUnsetMaxFitsTheBalance(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		// Enough for the prompt and exactly 100 output tokens.
		credit := Cost(1000, 100, m8bPrompt, m8bOut)
		team := f.team(t, "a", credit)
		_, err := f.l.Reserve(ctx, Reservation{RequestID: "explicit", TeamID: team, Model: m8b, PromptTokens: 1000, MaxOutputTokens: 4000})
		wantErr(t, "explicit max_tokens beyond the balance", err, ErrInsufficientBalance)
		got, err := f.l.Reserve(ctx, Reservation{RequestID: "unset", TeamID: team, Model: m8b, PromptTokens: 1000})
		if err != nil {
			t.Fatalf("Reserve without max_tokens: %v", err)
		}
		if got.MaxOutputTokens != 100 || got.Microcredits != credit {
			t.Fatalf("Reserve = %+v, want 100 tokens for %d", got, credit)
		}
		if b := f.balance(t, team); b.Available != 0 {
			t.Fatalf("available = %d, want 0", b.Available)
		}
		_, err = f.l.Reserve(ctx, Reservation{RequestID: "broke", TeamID: team, Model: m8b, PromptTokens: 1000})
		wantErr(t, "unset max_tokens with nothing left", err, ErrInsufficientBalance)
		f.checkBooks(t)
	})
}

func TestReserveRefusesBadInput(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 1_000_000)
		tests := []struct {
			name   string
			r      Reservation
			target error
		}{
			{name: "unknown model", r: Reservation{RequestID: "x1", TeamID: team, Model: "gpt-9"}, target: ErrUnknownModel},
			{name: "empty model", r: Reservation{RequestID: "x2", TeamID: team}, target: ErrUnknownModel},
			{name: "unknown team", r: Reservation{RequestID: "x3", TeamID: team + 100, Model: m8b}, target: ErrUnknownTeam},
			{name: "zero team", r: Reservation{RequestID: "x4", Model: m8b}, target: ErrUnknownTeam},
			{name: "empty id", r: Reservation{TeamID: team, Model: m8b}, target: ErrInvalidInput},
			{name: "negative prompt", r: Reservation{RequestID: "x5", TeamID: team, Model: m8b, PromptTokens: -1}, target: ErrInvalidInput},
			{name: "negative max", r: Reservation{RequestID: "x6", TeamID: team, Model: m8b, MaxOutputTokens: -1}, target: ErrInvalidInput},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := f.l.Reserve(context.Background(), tt.r)
				wantErr(t, "Reserve", err, tt.target)
			})
		}
		var rows int
		if err := f.db.QueryRow("SELECT COUNT(*) FROM usage_ledger").Scan(&rows); err != nil || rows != 0 {
			t.Fatalf("%d ledger rows (%v) after refused reservations, want 0", rows, err)
		}
		if b := f.balance(t, team); b.Reserved != 0 {
			t.Fatalf("reserved = %d after refused reservations, want 0", b.Reserved)
		}
	})
}

func TestReserveIsIdempotent(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		// Room for exactly one hold: a retry must not be refused for want
		// of a second.
		team := f.team(t, "a", 500)
		first := f.reserve(t, req("r1", team))
		retry := req("r1", team)
		retry.MaxOutputTokens = 7 // a retry's fields do not matter
		again, err := f.l.Reserve(ctx, retry)
		if err != nil {
			t.Fatalf("retried Reserve: %v", err)
		}
		want := first
		want.Existing = true
		if first.Existing || again != want {
			t.Fatalf("Reserve, retry = %+v, %+v; want a new hold, then it again marked existing", first, again)
		}
		if b := f.balance(t, team); b.Reserved != first.Microcredits {
			t.Fatalf("reserved = %d, want one hold of %d", b.Reserved, first.Microcredits)
		}
		if _, err := f.l.Cancel(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
		after, err := f.l.Reserve(ctx, req("r1", team))
		if err != nil || !after.Existing {
			t.Fatalf("Reserve of a cancelled id = %+v, %v; want the existing row", after, err)
		}
		if b := f.balance(t, team); b.Reserved != 0 || f.status(t, "r1") != StatusCancelled {
			t.Fatalf("reserving a cancelled id held %d or changed the row", b.Reserved)
		}
		other := f.team(t, "b", 10_000)
		_, err = f.l.Reserve(ctx, req("r1", other))
		wantErr(t, "Reserve of another team's request id", err, ErrIdempotencyConflict)
		if b := f.balance(t, other); b.Reserved != 0 {
			t.Fatalf("the refused id held %d of team b", b.Reserved)
		}
		f.checkBooks(t)
	})
}

func TestConcurrentReserveOfOneID(t *testing.T) {
	const callers = 10
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 1_000_000)
		results := make([]Reserved, callers)
		errs := make([]error, callers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				<-start
				results[i], errs[i] = f.l.Reserve(context.Background(), req("same", team))
			})
		}
		close(start)
		wg.Wait()
		created := 0
		for i := range callers {
			if errs[i] != nil {
				t.Fatalf("caller %d: %v", i, errs[i])
			}
			if !results[i].Existing {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("%d callers created the row, want 1", created)
		}
		if b := f.balance(t, team); b.Reserved != 500 {
			t.Fatalf("reserved = %d, want one hold of 500", b.Reserved)
		}
		f.checkBooks(t)
	})
}

func TestReserveRecordsTheKey(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 1_000_000)
		var key int64
		if err := f.db.QueryRowContext(ctx, "INSERT INTO api_keys (team_id, prefix, hash) VALUES ($1, 'sk-x', $2) RETURNING id",
			team, []byte{1, 2, 3}).Scan(&key); err != nil {
			t.Fatal(err)
		}
		withKey := req("k", team)
		withKey.KeyID = key
		f.reserve(t, withKey)
		f.reserve(t, req("jwt", team))
		for id, want := range map[string]int64{"k": key, "jwt": 0} {
			out, err := f.l.Cancel(ctx, id)
			if err != nil || out.KeyID != want {
				t.Errorf("Cancel(%s).KeyID = %d (%v), want %d", id, out.KeyID, err, want)
			}
		}
	})
}
