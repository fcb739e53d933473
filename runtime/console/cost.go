package console

import (
	"context"
	"net/http"
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
	// settled rows grouped per model and team, and the node events; longer
	// than a page's few indexed reads.
	costTimeout = 30 * time.Second
)

// costView is the cost page's data.
type costView struct {
	pageView
	Report costreport.Report
	// NoModel names the row of nodes that registered no model.
	NoModel string
}

// costProfiles prices GPU-hours for the cost page: the configured ones, or
// the reference workload's, as `llmplat report` without a config file.
func (c *Console) costProfiles() costreport.Profiles {
	if c.cfg.CostProfiles != nil {
		return *c.cfg.CostProfiles
	}
	return costreport.NewProfiles(capacity.ReferenceInput())
}

// costPage shows the week's GPU-hours against the tokens the ledger
// settled, per model: the cost report (package costreport) over the last
// costWindow, its GPU time from the node registry's events.
func (c *Console) costPage(ctx *gin.Context) {
	se := current(ctx)
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), costTimeout)
	defer cancel()
	now := c.cfg.Now().UTC()
	v := costView{pageView: c.view(se, "GPU-hours and tokens", "cost",
		"the weekly cost report (as `llmplat report`): GPU-hours from the node registry's events (register to drain or deregister, "+
			"times the node's GPUs, priced per GPU kind), tokens from the ledger's settled rows created in the window")}
	r, err := costreport.Generate(rctx, c.cfg.DB, costreport.Options{Window: costreport.Window{From: now.Add(-costWindow), To: now},
		GPU: costreport.NodeEvents{DB: c.cfg.DB, Profiles: c.costProfiles()}})
	if err != nil {
		c.cfg.Logger.Warn("console cost report unavailable", "err", err)
		c.renderError(ctx, se, http.StatusServiceUnavailable, "The week's cost report cannot be computed: "+err.Error())
		return
	}
	v.Report, v.NoModel = r, costreport.NoModel
	c.render(ctx, http.StatusOK, "cost", v)
}
