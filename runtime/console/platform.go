package console

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// nodeRow is a node as the nodes page lists it.
type nodeRow struct {
	adminwire.Node
	ModelNames []string
}

// nodesView is the nodes page's data.
type nodesView struct {
	pageView
	Nodes           []nodeRow
	Healthy         int
	Draining        int
	LiveUnavailable bool
}

// nodesPage lists what GET /admin/nodes serves: every registered node
// and, from the heartbeats in Redis, its live state.
func (c *Console) nodesPage(ctx *gin.Context) {
	se := current(ctx)
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	v := nodesView{pageView: c.view(se, "Nodes", "nodes",
		"the nodes table of the platform database (as GET /admin/nodes) and each node's last heartbeat in Redis")}
	nodes, err := c.cfg.Directory.ListNodes(rctx)
	if err != nil {
		c.cfg.Logger.Warn("console nodes unavailable", "err", err)
		c.renderUnavailable(ctx, se, "The nodes cannot be read: the platform database is not answering.")
		return
	}
	var live map[string]adminwire.NodeLive
	if c.cfg.Nodes != nil {
		if live, err = c.cfg.Nodes.Live(rctx); err != nil {
			c.cfg.Logger.Warn("console node live view unavailable", "err", err)
			v.LiveUnavailable = true
		}
	}
	v.Nodes = make([]nodeRow, 0, len(nodes))
	for _, n := range nodes {
		if l, ok := live[n.ID]; ok {
			n.Live = &l
			if l.Healthy {
				v.Healthy++
			}
			if l.Draining {
				v.Draining++
			}
		}
		row := nodeRow{Node: n, ModelNames: modelNames(n)}
		v.Nodes = append(v.Nodes, row)
	}
	c.render(ctx, http.StatusOK, "nodes", v)
}

// teamRow is a team as the teams page lists it.
type teamRow struct {
	adminwire.Team
	SpentMicrocredits int64
}

// teamsView is the teams page's data.
type teamsView struct {
	pageView
	Teams      []teamRow
	MonthStart time.Time
}

// teamsPage lists every team's balance and its settled spend this month.
func (c *Console) teamsPage(ctx *gin.Context) {
	se := current(ctx)
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	now := c.cfg.Clock.Now().UTC()
	v := teamsView{pageView: c.view(se, "Teams", "teams",
		"the teams table (balance, reserved) and the settled rows of the credit ledger this month, per team"),
		MonthStart: time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)}
	teams, err := c.cfg.Directory.ListTeams(rctx)
	for _, t := range teams {
		if err != nil {
			break
		}
		row := teamRow{Team: t}
		// The teams table holds the balance only; reserved and available
		// money come from the ledger, as GET /admin/teams fills them.
		b, berr := c.cfg.Ledger.Balance(rctx, t.ID)
		if berr != nil {
			err = berr
			break
		}
		row.BalanceMicrocredits, row.ReservedMicrocredits, row.AvailableMicrocredits = b.Balance, b.Reserved, b.Available
		usage, uerr := c.cfg.Ledger.Usage(rctx, t.ID, v.MonthStart, now.Add(time.Second))
		for _, u := range usage {
			row.SpentMicrocredits += u.CostMicrocredits
		}
		err = uerr
		v.Teams = append(v.Teams, row)
	}
	if err != nil {
		c.cfg.Logger.Warn("console teams unavailable", "err", err)
		c.renderUnavailable(ctx, se, "The teams cannot be read: the platform database is not answering.")
		return
	}
	c.render(ctx, http.StatusOK, "teams", v)
}

// platformModel is a model as the platform's models page lists it.
type platformModel struct {
	adminwire.Model
	Nodes, Healthy int
	// Pending is the requests waiting for the model (Config.Pending).
	Pending int64
}

// platformModelsView is the platform models page's data.
type platformModelsView struct {
	pageView
	Models          []platformModel
	LiveUnavailable bool
	// ShowPending says the page has pending counts; PendingUnavailable
	// that Redis did not answer for them.
	ShowPending, PendingUnavailable bool
	// Capacity is each model's serving capacity from the nodes'
	// heartbeats; nil when the page has no live state.
	Capacity []modelCapacity
}

// platformModelsPage lists every declared model with its prices and how
// many registered nodes serve it, and how many of those are healthy.
func (c *Console) platformModelsPage(ctx *gin.Context) {
	se := current(ctx)
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	v := platformModelsView{pageView: c.view(se, "Models", "platform_models",
		"the model declarations of the platform database, the nodes table and the nodes' heartbeats in Redis; "+
			"pending requests from the gateways' shared queue and the callers held while a model wakes from zero, in Redis"),
		ShowPending: c.cfg.Pending != nil}
	models, err := c.cfg.Directory.ListModels(rctx)
	var nodes []adminwire.Node
	if err == nil {
		nodes, err = c.cfg.Directory.ListNodes(rctx)
	}
	if err != nil {
		c.cfg.Logger.Warn("console models unavailable", "err", err)
		c.renderUnavailable(ctx, se, "The models cannot be read: the platform database is not answering.")
		return
	}
	var live map[string]adminwire.NodeLive
	if c.cfg.Nodes != nil {
		if live, err = c.cfg.Nodes.Live(rctx); err != nil {
			v.LiveUnavailable = true
		}
	}
	for _, m := range models {
		pm := platformModel{Model: m}
		for _, n := range nodes {
			names := modelNames(n)
			if !slices.Contains(names, m.Name) {
				continue
			}
			pm.Nodes++
			if l, ok := live[n.ID]; ok && l.Healthy && !l.Draining {
				pm.Healthy++
			}
		}
		if v.ShowPending && !v.PendingUnavailable {
			if pm.Pending, err = c.cfg.Pending(rctx, m.Name); err != nil {
				c.cfg.Logger.Warn("console pending requests unavailable", "model", m.Name, "err", err)
				v.PendingUnavailable = true
			}
		}
		v.Models = append(v.Models, pm)
	}
	if c.cfg.Nodes != nil && !v.LiveUnavailable {
		v.Capacity = capacityOf(v.Models, nodes, live, v.ShowPending && !v.PendingUnavailable)
	}
	c.render(ctx, http.StatusOK, "platform_models", v)
}

// modelNames reads the platform model names out of the model slots a node
// registered (stored as the registry's JSON); a row it cannot read lists
// none rather than failing the page.
func modelNames(n adminwire.Node) []string {
	var slots []struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(n.Models, &slots)
	names := make([]string, 0, len(slots))
	for _, s := range slots {
		names = append(names, s.Name)
	}
	return names
}
