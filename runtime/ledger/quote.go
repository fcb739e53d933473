package ledger

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// quoteTermsTTL is how long Quote trusts the models' terms it loaded: a
// price or limit the platform team changes reaches quotes within seconds,
// as it reaches the gateway's model catalog, and the database is asked at
// most once per TTL. Reserve always reads the terms afresh, so a stale
// quote can only make a reservation smaller than quoted or refuse it.
const quoteTermsTTL = 5 * time.Second

// termsCache holds every model's terms for Quote. A quote reads the
// current snapshot without a lock: the gateway quotes every request, and a
// mutex held on each, and held through each reload's query, made all
// quotes wait on one another and on the database.
type termsCache struct {
	snap atomic.Pointer[termsSnapshot]
	// reload is held by the one caller that reloads the terms.
	reload sync.Mutex
}

// termsSnapshot is every model's terms as loaded at one time; it is never
// changed once stored.
type termsSnapshot struct {
	terms  map[string]modelTerms
	loaded time.Time
}

// Quote returns what Reserve would hold for r if the team's balance covered
// the whole cap — the output cap (the engine's max_tokens) and the estimate
// — without writing anything: the gateway sends a request to its engine on
// a quote while the reservation commits. It refuses as Reserve does, with
// ErrUnknownModel or ErrContextTooLong; the team's balance is not read
// (Reserved.Available is zero), and a quote holds nothing.
func (l *Ledger) Quote(ctx context.Context, r Reservation) (Reserved, error) {
	if err := r.validate(); err != nil {
		return Reserved{}, fmt.Errorf("quote %q: %w", r.RequestID, err)
	}
	m, ok, err := l.modelTerms(ctx, r.Model)
	if err != nil {
		return Reserved{}, fmt.Errorf("quote %q: %w", r.RequestID, err)
	}
	if !ok {
		return Reserved{}, fmt.Errorf("quote %q: model %q: %w", r.RequestID, r.Model, ErrUnknownModel)
	}
	maxOut, err := clampOutput(r, m)
	if err != nil {
		return Reserved{}, fmt.Errorf("quote %q: %w", r.RequestID, err)
	}
	maxOut, est, err := fitBalance(r, m, maxOut, math.MaxInt64)
	if err != nil {
		return Reserved{}, fmt.Errorf("quote %q: %w", r.RequestID, err)
	}
	return Reserved{RequestID: r.RequestID, Microcredits: est, MaxOutputTokens: maxOut}, nil
}

// Covers reports whether Reserve would hold r now, holding nothing: nil
// when the team's available balance covers it (with the output cap fitted
// to the balance when the client named none, as Reserve fits it), or the
// refusal Reserve would give (ErrInsufficientBalance, ErrUnknownModel,
// ErrContextTooLong, ErrUnknownTeam). It reads the team's row without a
// lock, so a reservation made meanwhile may still be refused: it is for
// deciding whether a caller is one admission would take (a model woken
// from zero counts only those as its demand), never for money.
func (l *Ledger) Covers(ctx context.Context, r Reservation) error {
	if err := r.validate(); err != nil {
		return fmt.Errorf("covers %q: %w", r.RequestID, err)
	}
	m, ok, err := l.modelTerms(ctx, r.Model)
	if err != nil {
		return fmt.Errorf("covers %q: %w", r.RequestID, err)
	}
	if !ok {
		return fmt.Errorf("covers %q: model %q: %w", r.RequestID, r.Model, ErrUnknownModel)
	}
	maxOut, err := clampOutput(r, m)
	if err != nil {
		return fmt.Errorf("covers %q: %w", r.RequestID, err)
	}
	b, err := l.Balance(ctx, r.TeamID)
	if err != nil {
		return fmt.Errorf("covers %q: %w", r.RequestID, err)
	}
	if _, _, err := fitBalance(r, m, maxOut, b.Available); err != nil {
		return fmt.Errorf("covers %q: %w", r.RequestID, err)
	}
	return nil
}

// modelTerms returns a model's terms from the cache. When the cache is
// older than quoteTermsTTL, one caller reloads every model's terms while
// the others go on with the terms they have (a stale quote is safe, see
// quoteTermsTTL); only a ledger that has none yet waits for the load.
func (l *Ledger) modelTerms(ctx context.Context, model string) (modelTerms, bool, error) {
	c := &l.quotes
	snap := c.snap.Load()
	if snap == nil || l.cfg.Clock.Now().Sub(snap.loaded) >= quoteTermsTTL {
		var err error
		if snap, err = l.reloadTerms(ctx, snap); err != nil {
			return modelTerms{}, false, err
		}
	}
	m, ok := snap.terms[model]
	return m, ok, nil
}

// reloadTerms returns fresh terms, loading them unless another caller has
// meanwhile; with stale terms in hand, it returns them at once while
// another caller loads.
func (l *Ledger) reloadTerms(ctx context.Context, stale *termsSnapshot) (*termsSnapshot, error) {
	c := &l.quotes
	if stale == nil {
		c.reload.Lock()
	} else if !c.reload.TryLock() {
		return stale, nil
	}
	defer c.reload.Unlock()
	if snap := c.snap.Load(); snap != nil && snap != stale {
		return snap, nil // loaded while this caller waited for the lock
	}
	terms, err := l.loadTerms(ctx)
	if err != nil {
		return nil, err
	}
	snap := &termsSnapshot{terms: terms, loaded: l.cfg.Clock.Now()}
	c.snap.Store(snap)
	return snap, nil
}

// loadTerms reads every model's terms.
func (l *Ledger) loadTerms(ctx context.Context) (map[string]modelTerms, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT name, prompt_price_micro_per_mtok, completion_price_micro_per_mtok,
		max_context_tokens, max_output_tokens FROM models`)
	if err != nil {
		return nil, fmt.Errorf("load model terms: %w", err)
	}
	defer rows.Close()
	terms := map[string]modelTerms{}
	for rows.Next() {
		var name string
		var m modelTerms
		if err := rows.Scan(&name, &m.promptPrice, &m.completionPrice, &m.maxContext, &m.maxOutput); err != nil {
			return nil, fmt.Errorf("load model terms: %w", err)
		}
		terms[name] = m
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load model terms: %w", err)
	}
	return terms, nil
}
