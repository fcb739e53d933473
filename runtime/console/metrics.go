package console

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
)

// The sources the per-key usage, latency and SLI pages name.
const (
	keyUsageSource = "settled rows of the credit ledger per API key and model (the usage_daily rollup, exact as GET /v1/usage), " +
		"for requests created in the range"
	latencySource = "the latency_hourly rollup of the credit ledger (each settled request's time to first token, generation time and " +
		"queue wait as its gateway saw them), for requests created in the range; refusals from the gateways' per-day counts in Redis"
	sliSource = "the latency_hourly rollup of the credit ledger over every team, and the gateways' per-hour refusal counts in Redis; " +
		"the last hour is the current UTC hour and the one before, the last day the 25 UTC hours up to now"
)

// refusalMeanings say in words what each refusal reason of the gateway
// means; a reason not listed shows as its label.
var refusalMeanings = map[string]string{
	"rpm":                  "rate limit: the key's requests per minute",
	"streams":              "the key's concurrent streams",
	"tokens_per_day":       "token quota: the key's tokens per day",
	"balance":              "credit: the team's balance does not cover the request",
	"no_node":              "no capacity: no healthy engine serves the model",
	"unserved":             "no capacity: no node serves the model",
	"queue_timeout":        "queue full: no engine had room within the queue limit",
	"at_zero":              "waking: the model was at zero replicas",
	"engine_refused":       "the engine refused the request",
	"ledger_unavailable":   "the ledger database did not answer",
	"limits_unavailable":   "the limits (Redis) did not answer",
	"catalog_unavailable":  "the model catalog did not answer",
	"quota_unavailable":    "the limits (Redis) did not answer",
	"dispatch_unavailable": "the dispatcher did not answer",
}

// refusalRow is one status and reason of a range's refusals.
type refusalRow struct {
	quota.RefusalCount
	Meaning string
}

// refusalRows adds the meanings to counts.
func refusalRows(counts []quota.RefusalCount) []refusalRow {
	out := make([]refusalRow, 0, len(counts))
	for _, c := range counts {
		m := refusalMeanings[c.Reason]
		if m == "" {
			m = c.Reason
		}
		out = append(out, refusalRow{RefusalCount: c, Meaning: m})
	}
	return out
}

// keyNames returns the team's API keys' names by id, for the tables; a
// key without a name shows its prefix.
func (c *Console) keyNames(ctx context.Context, teamID int64) (map[int64]string, error) {
	keys, err := c.cfg.Directory.ListKeys(ctx, teamID)
	if err != nil {
		return nil, err
	}
	names := make(map[int64]string, len(keys))
	for _, k := range keys {
		names[k.ID] = k.Name
		if k.Name == "" {
			names[k.ID] = k.Prefix + "…"
		}
	}
	return names, nil
}

// keyName is how a table names the key id.
func keyName(names map[int64]string, id int64) string {
	if id == 0 {
		return "(no key: signed in with a JWT)"
	}
	if n, ok := names[id]; ok {
		return n
	}
	return "key #" + strconv.FormatInt(id, 10)
}

// keyUsageRow is one key's usage of one model.
type keyUsageRow struct {
	ledger.KeyUsage
	KeyName string
}

// keyUsageView is the per-key usage page's data.
type keyUsageView struct {
	pageView
	FromText, ToText string
	Problem          string
	Rows             []keyUsageRow
	Total            ledger.ModelUsage
}

// readKeyUsage reads the team's usage per key and model over [from, to),
// with the keys' names.
func (c *Console) readKeyUsage(ctx context.Context, teamID int64, from, to time.Time) ([]keyUsageRow, error) {
	ctx, cancel := c.budget(ctx)
	defer cancel()
	usage, err := c.cfg.Ledger.UsageByKey(ctx, teamID, from, to)
	if err != nil || len(usage) == 0 {
		return nil, err
	}
	names, err := c.keyNames(ctx, teamID)
	if err != nil {
		return nil, err
	}
	rows := make([]keyUsageRow, 0, len(usage))
	for _, u := range usage {
		rows = append(rows, keyUsageRow{KeyUsage: u, KeyName: keyName(names, u.KeyID)})
	}
	return rows, nil
}

// keyUsagePage shows which of the team's API keys spent what, per model,
// over a range.
func (c *Console) keyUsagePage(ctx *gin.Context) {
	se := current(ctx)
	v := keyUsageView{pageView: c.view(se, "Usage per API key", "usage", keyUsageSource)}
	from, to, err := c.usageRange(ctx)
	v.FromText, v.ToText = from.Format(time.DateOnly), to.Add(-day).Format(time.DateOnly)
	if err != nil {
		v.Problem = err.Error()
		c.render(ctx, http.StatusBadRequest, "usage_keys", v)
		return
	}
	if v.Rows, err = c.readKeyUsage(ctx.Request.Context(), se.Principal.TeamID, from, to); err != nil {
		c.cfg.Logger.Warn("console usage per key unavailable", "err", err)
		c.renderUnavailable(ctx, se, "Usage per key cannot be read: the ledger database is not answering.")
		return
	}
	for _, r := range v.Rows {
		addUsage(&v.Total, r.ModelUsage)
	}
	v.ReadAt = c.cfg.Clock.Now().UTC()
	c.render(ctx, http.StatusOK, "usage_keys", v)
}

// keyUsageCSV downloads the per-key table: one line per key and model.
func (c *Console) keyUsageCSV(ctx *gin.Context) {
	se := current(ctx)
	from, to, err := c.usageRange(ctx)
	if err != nil {
		ctx.String(http.StatusBadRequest, "%s\n", err)
		return
	}
	rows, err := c.readKeyUsage(ctx.Request.Context(), se.Principal.TeamID, from, to)
	if err != nil {
		ctx.Header("Retry-After", storeDownRetry)
		ctx.String(http.StatusServiceUnavailable, "the ledger database is not answering\n")
		return
	}
	w := startCSV(ctx, "usage-by-key", from, to)
	_ = w.Write([]string{"key_id", "key_name", "model", "requests", "prompt_tokens", "completion_tokens", "cost_microcredits"})
	for _, r := range rows {
		_ = w.Write([]string{strconv.FormatInt(r.KeyID, 10), csvSafe(r.KeyName), csvSafe(r.Model), strconv.FormatInt(r.Requests, 10),
			strconv.FormatInt(r.PromptTokens, 10), strconv.FormatInt(r.CompletionTokens, 10), strconv.FormatInt(r.CostMicrocredits, 10)})
	}
	w.Flush()
}

// latencyRow is one model's (or one key's and model's) latency as the
// pages show it, with the figures read from its histograms. A figure not
// known (no timed request) is -1 and shows as "—".
type latencyRow struct {
	ledger.Latency
	KeyName                        string
	TTFTp50, TTFTp95, QueueWaitp95 int64 // milliseconds
	TokensPerSecond                float64
	// Refused429 and Refused503 are the model's refusals of each status
	// (the platform page), and their rates over the requests plus them.
	Refused429, Refused503 int64
	Rate429, Rate503       float64
}

// newLatencyRow reads the figures out of l.
func newLatencyRow(l ledger.Latency) latencyRow {
	r := latencyRow{Latency: l, TTFTp50: -1, TTFTp95: -1, QueueWaitp95: -1, TokensPerSecond: -1}
	ms := func(h ledger.Histogram, q float64) int64 {
		if d, ok := h.Quantile(q); ok {
			return d.Milliseconds()
		}
		return -1
	}
	r.TTFTp50, r.TTFTp95, r.QueueWaitp95 = ms(l.TTFT, 0.5), ms(l.TTFT, 0.95), ms(l.QueueWait, 0.95)
	if tps, ok := l.TokensPerSecond(); ok {
		r.TokensPerSecond = tps
	}
	return r
}

// formatLatency shows a percentile in milliseconds: "—" when unknown
// (-1), and "< 10 ms" inside the first bucket, where the estimate says only
// that much (it would show the bucket's top for requests that never
// queued).
func formatLatency(ms int64) string {
	switch {
	case ms < 0:
		return "—"
	case ms <= ledger.LatencyBounds[0]:
		return "< " + strconv.FormatInt(ledger.LatencyBounds[0], 10) + " ms"
	}
	return formatInt(ms) + " ms"
}

// rate is n over the requests and refusals it is among; 0 when none.
func rate(n, of int64) float64 {
	if of <= 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// latencyView is the team's latency and errors page's data.
type latencyView struct {
	pageView
	FromText, ToText string
	Problem          string
	Models, Keys     []latencyRow
	Refusals         []refusalRow
	// Requests is the settled requests of the range; Refused429 and
	// Refused503 the refusals, and the rates over both.
	Requests               int64
	Refused429, Refused503 int64
	Rate429, Rate503       float64
	// RefusalsUnavailable says Redis did not answer for the counts.
	RefusalsUnavailable bool
}

// latencyPage shows the latency the team's requests met over a range, per
// model and per key, and the team's 402, 429 and 503 refusals with their
// reasons.
func (c *Console) latencyPage(ctx *gin.Context) {
	se := current(ctx)
	team := se.Principal.TeamID
	v := latencyView{pageView: c.view(se, "Latency & errors", "latency", latencySource)}
	from, to, err := c.usageRange(ctx)
	v.FromText, v.ToText = from.Format(time.DateOnly), to.Add(-day).Format(time.DateOnly)
	if err != nil {
		v.Problem = err.Error()
		c.render(ctx, http.StatusBadRequest, "latency", v)
		return
	}
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	models, err := c.cfg.Ledger.TeamLatency(rctx, team, from, to, ledger.ByModel)
	var keys []ledger.Latency
	var names map[int64]string
	if err == nil {
		keys, err = c.cfg.Ledger.TeamLatency(rctx, team, from, to, ledger.ByKeyAndModel)
	}
	if err == nil {
		names, err = c.keyNames(rctx, team)
	}
	if err != nil {
		c.cfg.Logger.Warn("console latency unavailable", "err", err)
		c.renderUnavailable(ctx, se, "Latency cannot be read: the ledger database is not answering.")
		return
	}
	for _, m := range models {
		v.Models = append(v.Models, newLatencyRow(m))
		v.Requests += m.Requests
	}
	for _, k := range keys {
		r := newLatencyRow(k)
		r.KeyName = keyName(names, k.KeyID)
		v.Keys = append(v.Keys, r)
	}
	qctx, qcancel := context.WithTimeout(ctx.Request.Context(), redisCallTimeout)
	defer qcancel()
	counts, err := quota.ReadTeamRefusals(qctx, c.cfg.Redis, quota.NewKeys(c.cfg.Prefix), team, from, to)
	if err != nil {
		c.cfg.Logger.Warn("console refusal counts unavailable", "err", err)
		v.RefusalsUnavailable = true
	}
	v.Refusals = refusalRows(counts)
	for _, r := range counts {
		switch r.Status {
		case http.StatusTooManyRequests:
			v.Refused429 += r.Count
		case http.StatusServiceUnavailable:
			v.Refused503 += r.Count
		}
	}
	all := v.Requests + v.Refused429 + v.Refused503
	v.Rate429, v.Rate503 = rate(v.Refused429, all), rate(v.Refused503, all)
	v.ReadAt = c.cfg.Clock.Now().UTC()
	c.render(ctx, http.StatusOK, "latency", v)
}

// sliWindow is the platform's SLIs over one window.
type sliWindow struct {
	Name     string
	ID       string
	From, To time.Time
	Models   []latencyRow
	// Unattributed are the refusals that came before the body named a
	// model (a key's requests per minute or streams).
	Unattributed        []refusalRow
	RefusalsUnavailable bool
}

// slisView is the platform SLI page's data.
type slisView struct {
	pageView
	Windows []sliWindow
}

// slisWindows are the windows the SLI page shows: the last hour and the
// last day.
var slisWindows = []struct {
	name, id string
	span     time.Duration
}{{"Last hour", "hour", time.Hour}, {"Last day", "day", day}}

// slisPage shows the platform's SLIs per model for the last hour and the
// last day: TTFT p50 and p95, queue wait p95, tokens per second, and the
// 429 and 503 rates.
func (c *Console) slisPage(ctx *gin.Context) {
	se := current(ctx)
	v := slisView{pageView: c.view(se, "SLIs", "slis", sliSource)}
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	now := c.cfg.Clock.Now().UTC()
	for _, w := range slisWindows {
		win := sliWindow{Name: w.name, ID: w.id, From: now.Add(-w.span).Truncate(time.Hour), To: now}
		lat, err := c.cfg.Ledger.PlatformLatency(rctx, now.Add(-w.span), now)
		if err != nil {
			c.cfg.Logger.Warn("console SLIs unavailable", "err", err)
			c.renderUnavailable(ctx, se, "The SLIs cannot be read: the ledger database is not answering.")
			return
		}
		qctx, qcancel := context.WithTimeout(ctx.Request.Context(), redisCallTimeout)
		counts, err := quota.ReadPlatformRefusals(qctx, c.cfg.Redis, quota.NewKeys(c.cfg.Prefix), now.Add(-w.span), now)
		qcancel()
		if err != nil {
			c.cfg.Logger.Warn("console refusal counts unavailable", "err", err)
			win.RefusalsUnavailable = true
		}
		seen := map[string]bool{}
		for _, l := range lat {
			win.Models = append(win.Models, newLatencyRow(l))
			seen[l.Model] = true
		}
		for _, r := range counts {
			if r.Model != "" && !seen[r.Model] { // refused, never served in the window
				win.Models = append(win.Models, newLatencyRow(ledger.Latency{Model: r.Model}))
				seen[r.Model] = true
			}
		}
		byModel := make(map[string]*latencyRow, len(win.Models))
		for i := range win.Models {
			byModel[win.Models[i].Model] = &win.Models[i]
		}
		var unattributed []quota.RefusalCount
		for _, r := range counts {
			row := byModel[r.Model]
			if row == nil {
				unattributed = append(unattributed, r)
				continue
			}
			switch r.Status {
			case http.StatusTooManyRequests:
				row.Refused429 += r.Count
			case http.StatusServiceUnavailable:
				row.Refused503 += r.Count
			}
		}
		for i := range win.Models {
			m := &win.Models[i]
			all := m.Requests + m.Refused429 + m.Refused503
			m.Rate429, m.Rate503 = rate(m.Refused429, all), rate(m.Refused503, all)
		}
		win.Unattributed = refusalRows(unattributed)
		v.Windows = append(v.Windows, win)
	}
	v.ReadAt = now
	c.render(ctx, http.StatusOK, "platform_slis", v)
}
