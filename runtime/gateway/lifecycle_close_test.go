package gateway

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
)

// TestAdmissionCloseFromEveryState builds an admission in each of its
// states on the real limiter and ledger, closes it with each outcome —
// three times, as a panic's close after an explicit one would — and checks
// that its row was settled as billOf says, or cancelled, exactly
// once (or never written), that its stream slot was released exactly
// once, and that nothing of it is left in Redis.
func TestAdmissionCloseFromEveryState(t *testing.T) {
	s, rig, gw := newLifecycleStack(t)
	ctx := context.Background()
	team := s.team("close", 1000*credit)
	k, err := s.adm.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team, MaxStreams: 1}, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p := auth.Principal{Kind: auth.KindAPIKey, TeamID: team, TeamName: "close", KeyID: k.ID, Limits: auth.Limits{MaxStreams: 1}}
	const (
		none      = "" // no row
		cancelled = "cancelled"
		partial   = "partial"
		exact     = "exact"
	)
	// What the relay had counted when the limits ended early (release).
	progress := Outcome{State: Completed, CompletionTokens: 3, Relayed: chunks(3)}
	outcomes := []struct {
		name    string
		out     Outcome
		wantRow string // for an admission that holds a row
	}{
		{"refused", Outcome{State: Refused}, cancelled},
		{"client gone", Outcome{State: ClientGone, CompletionTokens: 5, Relayed: chunks(5)}, partial},
		{"broken", Outcome{State: Broken, CompletionTokens: 5, Relayed: chunks(5)}, partial},
		{"completed", Outcome{State: Completed, Usage: true, PromptTokens: 12, CompletionTokens: 5, Relayed: chunks(5)}, exact},
	}
	states := []admissionState{admPending, admAdmitted, admReserving, admHeld, admReleased, admReleaseFailed, admClosed}
	for i, st := range states {
		for j, oc := range outcomes {
			t.Run(st.String()+"/"+oc.name, func(t *testing.T) {
				rid := fmt.Sprintf("req_close_%d_%d", i, j)
				a := gw.newAdmission(p, rid)
				a.model = "llama-8b"
				a.promptEstimate = 12
				r := ledger.Reservation{RequestID: rid, TeamID: team, KeyID: k.ID, Model: "llama-8b", PromptTokens: 12, MaxOutputTokens: 50}
				if st >= admAdmitted {
					d, err := gw.cfg.Limits.Admit(ctx, p.QuotaID(), rid, quota.KeyLimits{MaxStreams: 1})
					if err != nil || !d.Allowed {
						t.Fatalf("Admit = %+v, %v: a slot of an earlier case is still held", d, err)
					}
					a.slot, a.state = true, admAdmitted
				}
				switch {
				case st == admReserving:
					a.early, a.state = make(chan reserveAnswer, 1), admReserving
					go func() {
						res, err := gw.cfg.Ledger.Reserve(ctx, r)
						a.early <- reserveAnswer{res, err}
					}()
				case st >= admHeld:
					res, err := gw.cfg.Ledger.Reserve(ctx, r)
					if rej := a.take(res, err); rej != nil {
						t.Fatalf("reserve: %v", err)
					}
				}
				switch st {
				case admReleased:
					a.release(progress)
				case admReleaseFailed:
					rig.mu.Lock()
					rig.failFinish = 1
					rig.mu.Unlock()
					a.release(progress)
				case admClosed:
					a.Close(Outcome{State: Refused})
				}
				if a.state != st {
					t.Fatalf("built %v, want %v", a.state, st)
				}
				for range 3 {
					a.Close(oc.out)
				}
				gw.Wait()
				if a.state != admClosed {
					t.Errorf("state %v after Close, want closed", a.state)
				}

				wantRow, wantEnds, wantReleases := oc.wantRow, 1, 1
				switch st {
				case admPending:
					wantRow, wantEnds, wantReleases = none, 0, 0
				case admAdmitted:
					wantRow, wantEnds = none, 0
				case admClosed:
					wantRow = cancelled // by its first close
				}
				row, err := s.ledgerRow(rid)
				switch {
				case wantRow == none:
					if !errors.Is(err, sql.ErrNoRows) {
						t.Errorf("row %+v (%v), want none", row, err)
					}
				case err != nil:
					t.Errorf("row: %v, want %s", err, wantRow)
				case wantRow == cancelled:
					if row.status != "cancelled" {
						t.Errorf("row %+v, want cancelled", row)
					}
				case row.status != "settled" || row.from != wantRow || row.completion != oc.out.CompletionTokens:
					t.Errorf("row %+v, want settled %s with %d tokens", row, wantRow, oc.out.CompletionTokens)
				}
				ends, releases := rig.counts(rid)
				if ends != wantEnds || releases != wantReleases {
					t.Errorf("%d settles or cancels and %d slot releases, want %d and %d", ends, releases, wantEnds, wantReleases)
				}
				if n := s.activeStreams(s.redis.Client(), k.ID); n != 0 {
					t.Errorf("%d stream slots held after Close", n)
				}
				checkQueueEmpty(t, s, "llama-8b")
			})
		}
	}
}
