package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/costreport"
)

const (
	// costWindow is what the cost page covers: the week before the page
	// is read, as the weekly cost review does.
	costWindow = 7 * 24 * time.Hour
	// costTimeout bounds the cost report behind the page: a week of
	// settled rows grouped per model and team, and the node events. It is
	// the one console read allowed more than store.RequestBudget (a page's
	// few indexed reads): it scans a week rather than an index range, and
	// runs at most once per costCacheTTL per replica, on its own; the page
	// waits for it only within its own budget, so a frozen database gets
	// the page's 503 as quickly as any other page's.
	costTimeout = 30 * time.Second
	// costCacheTTL is how long one computed report serves the cost page:
	// computing it reads a week of settled rows, while a minute moves a
	// week's figures by at most one minute in 10,080, so reloads and
	// several admins cost one computation a minute per replica, not one
	// per view.
	costCacheTTL = time.Minute
)

// costView is the cost page's data.
type costView struct {
	pageView
	Report costreport.Report
	// NoModel names the row of nodes that registered no model.
	NoModel string
	// CacheSeconds is how long the page's report is shown before a view
	// computes a new one.
	CacheSeconds int
	// NoGPUs says which nodes up in the window registered no GPU, so
	// counted none; empty when every node did.
	NoGPUs string
	// WhyNoGPUHours says, in words, why the week counts no GPU-hours;
	// empty when it counts some.
	WhyNoGPUHours string
}

// whyNoGPUHours says why a report counts no GPU-hours: the nodes up in
// its window registered no GPU (noGPUs names them), or none was up.
func whyNoGPUHours(r costreport.Report, noGPUs string) string {
	switch {
	case r.Total.GPUHours > 0:
		return ""
	case noGPUs != "":
		return "No GPU-hours in this window: the only nodes up in it, " + noGPUs + ", registered no GPU, " +
			"so they count no GPU-hours and no GPU cost."
	default:
		return "No GPU-hours in this window: no node with a GPU was registered and up in it."
	}
}

// noGPUNames is how many nodes without a GPU the cost page names before it
// counts the rest: enough for the local mode's and a few on-premises
// nodes, without a wall of names.
const noGPUNames = 10

// noGPUs says the nodes up in the window that registered no GPU, the
// first noGPUNames by name: "2 nodes (a, b)".
func noGPUs(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	shown := ids[:min(len(ids), noGPUNames)]
	names := strings.Join(shown, ", ")
	if more := len(ids) - len(shown); more > 0 {
		names += fmt.Sprintf(" and %d more", more)
	}
	count := "1 node"
	if len(ids) > 1 {
		count = fmt.Sprintf("%d nodes", len(ids))
	}
	return count + " (" + names + ")"
}

// costCache keeps the last cost report a replica computed, for
// costCacheTTL. Nothing invalidates it early: the report covers the week
// up to when it was computed and the page says when that was, so a figure
// is at most costCacheTTL behind the ledger and the node registry, and the
// first view after the TTL computes a new one. Each replica keeps its own.
//
// A computation runs on its own, bounded by costTimeout, and views that
// arrive while it runs wait for it rather than compute their own; a view
// waits only as long as its page may (Config.QueryTimeout), so a frozen
// database answers the page within the budget of every other, while the
// computation goes on and serves the next view.
type costCache struct {
	mu       sync.Mutex
	report   costreport.Report
	computed time.Time // zero until a report is kept
	// running is closed when the computation under way ends; nil when
	// none runs. failed is the last computation's error.
	running chan struct{}
	failed  error
}

func newCostCache() *costCache { return &costCache{} }

// fresh reports whether the kept report serves a view at now.
func (c *costCache) fresh(now time.Time) bool {
	age := now.Sub(c.computed)
	return !c.computed.IsZero() && age >= 0 && age < costCacheTTL
}

// get returns the report computed within costCacheTTL before now, or
// starts computing one for now with compute (on ctx's values, without its
// end: compute bounds itself) and waits for it until ctx ends; it returns
// when the report was computed. A failed computation is not kept.
func (c *costCache) get(ctx context.Context, now time.Time,
	compute func(context.Context, time.Time) (costreport.Report, error)) (costreport.Report, time.Time, error) {
	c.mu.Lock()
	if c.fresh(now) {
		defer c.mu.Unlock()
		return c.report, c.computed, nil
	}
	if c.running == nil {
		done := make(chan struct{})
		c.running = done
		detached := context.WithoutCancel(ctx)
		go func() {
			defer close(done)
			r, err := compute(detached, now)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.running, c.failed = nil, err
			if err == nil {
				c.report, c.computed = r, now
			}
		}()
	}
	done := c.running
	c.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return costreport.Report{}, time.Time{}, fmt.Errorf("wait for the cost report: %w", context.Cause(ctx))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return costreport.Report{}, time.Time{}, c.failed
	}
	return c.report, c.computed, nil
}

// costProfiles prices GPU-hours for the cost page: the configured ones, or
// the reference workload's, as `llmplat report` without a config file.
func (c *Console) costProfiles() costreport.Profiles {
	if c.cfg.CostProfiles != nil {
		return *c.cfg.CostProfiles
	}
	return costreport.NewProfiles(capacity.ReferenceInput())
}

// costReport computes the cost report for the costWindow before now.
func (c *Console) costReport(ctx context.Context, now time.Time) (costreport.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, costTimeout)
	defer cancel()
	return costreport.Generate(ctx, c.cfg.DB, costreport.Options{Window: costreport.Window{From: now.Add(-costWindow), To: now},
		GPU: costreport.NodeEvents{DB: c.cfg.DB, Profiles: c.costProfiles(), CountUnpriced: true}})
}

// costPage shows the week's GPU-hours against the tokens the ledger
// settled, per model: the cost report (package costreport) over the last
// costWindow, its GPU time from the node registry's events, computed at
// most once per costCacheTTL.
func (c *Console) costPage(ctx *gin.Context) {
	se := current(ctx)
	v := costView{pageView: c.view(se, "GPU-hours and tokens", "cost",
		"the weekly cost report (as `llmplat report`): GPU-hours from the node registry's events (register to drain or deregister, "+
			"times the node's GPUs, priced per GPU kind), tokens from the ledger's settled rows created in the window"),
		NoModel: costreport.NoModel, CacheSeconds: int(costCacheTTL.Seconds())}
	wait, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	r, computed, err := c.cost.get(wait, c.cfg.Clock.Now().UTC(), c.costReport)
	if err != nil {
		c.cfg.Logger.Warn("console cost report unavailable", "err", err)
		c.renderUnavailable(ctx, se, "The week's cost report is not ready: the platform database is not answering in time. "+
			"Its computation goes on; reload shortly.")
		return
	}
	v.Report, v.ReadAt, v.NoGPUs = r, computed, noGPUs(r.NodesWithoutGPUs)
	v.WhyNoGPUHours = whyNoGPUHours(r, v.NoGPUs)
	c.render(ctx, http.StatusOK, "cost", v)
}
