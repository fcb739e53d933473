package orchestrator

import (
	"context"
	"time"

	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/registry"
)

// declaredRefresh is how often the wake publisher re-reads the declared
// models: one small query per replica every 5 s is nothing to the
// database, and a newly declared model's first callers queue (as before
// there was a wake record) for at most that long.
const declaredRefresh = 5 * time.Second

// zeroAfterStart is how long a new replica says nothing of a model at
// zero, only of ready ones: its first snapshots lack the cloud nodes until
// the controller's informers have synced and each engine's first scrape
// is in (a few seconds), and a replica restarting must not have every
// gateway refuse a served model with a cold start's Retry-After. While no
// replica speaks, callers queue as before.
const zeroAfterStart = 15 * time.Second

// ExpectedLoads is what a CloudSource may also tell: how long a model is
// expected to take from zero to a ready replica (the Kubernetes
// controller reads it from the model's Service). A model it does not know
// gets coldstart.DefaultExpectedLoad.
type ExpectedLoads interface {
	ExpectedLoad(model string) (time.Duration, bool)
}

// declared caches the declared model names for the wake publisher.
type declared struct {
	names []string
	at    time.Time
}

// publishWakes tells the cold-start board, for every declared model and
// every model a node serves, whether a healthy node serves it now, with
// its expected load time. A model with a ready node ends its wake there.
func (o *Orchestrator) publishWakes(ctx context.Context, now time.Time) {
	board := o.cfg.ColdStarts
	if board == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, pendingTimeout)
	defer cancel()
	verdicts := map[string]coldstart.Verdict{}
	for _, m := range o.declaredModels(ctx, now) {
		verdicts[m] = coldstart.Zero
	}
	for _, n := range o.snap.Load().nodes {
		for _, s := range n.Models {
			verdicts[s.Name] = max(verdicts[s.Name], verdictOf(n, now))
		}
	}
	loads, _ := o.cfg.Cloud.(ExpectedLoads)
	settled := now.Sub(o.born) >= zeroAfterStart
	for m, v := range verdicts {
		if v == coldstart.Zero && !settled {
			continue
		}
		var load time.Duration
		if loads != nil {
			load, _ = loads.ExpectedLoad(m)
		}
		if err := board.Publish(ctx, o.cfg.ID, m, v, load); err != nil {
			if ctx.Err() == nil {
				o.cfg.Logger.Warn("model state not published for cold starts", "model", m, "err", err)
			}
			return
		}
	}
}

// verdictOf is what node n says of its models at now: Ready when it is
// healthy and — for a node agent — has beaten since it registered; Unsure
// when it is healthy but has not beaten yet, since a node registers before
// its first heartbeat tells whether its engine is still loading (so its
// registration neither ends a wake nor has callers refused); else Zero. A
// cloud node has no registration: it is ready from its first scrape.
// A model takes its nodes' most hopeful verdict (Zero < Unsure < Ready).
func verdictOf(n registry.Node, now time.Time) coldstart.Verdict {
	switch {
	case !n.Healthy(now):
		return coldstart.Zero
	case n.LastSeen.After(n.RegisteredAt):
		return coldstart.Ready
	default:
		return coldstart.Unsure
	}
}

// declaredModels returns the declared models, re-read every
// declaredRefresh; a failed read keeps the last list.
func (o *Orchestrator) declaredModels(ctx context.Context, now time.Time) []string {
	if o.cfg.Models == nil {
		return nil
	}
	if d := o.declared; d != nil && now.Sub(d.at) < declaredRefresh {
		return d.names
	}
	names, err := o.cfg.Models(ctx)
	if err != nil {
		o.cfg.Logger.Warn("declared models not read for cold starts", "err", err)
		if o.declared != nil {
			return o.declared.names
		}
		return nil
	}
	o.declared = &declared{names: names, at: now}
	return names
}

// held adds the refused callers of a model at zero to its pending count:
// they are demand until a replica is ready, though none waits here.
func (o *Orchestrator) held(ctx context.Context, model string) int64 {
	if o.cfg.ColdStarts == nil {
		return 0
	}
	n, err := o.cfg.ColdStarts.Held(ctx, model)
	if err != nil {
		o.cfg.Logger.Warn("held demand not read for the pending gauge", "model", model, "err", err)
		return 0
	}
	return n
}
