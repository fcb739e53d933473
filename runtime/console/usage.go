package console

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/ledger"
)

const (
	// maxRangeDays bounds a chosen range: a quarter, read one day at a
	// time, stays a page rather than a report job.
	maxRangeDays = 92
	day          = 24 * time.Hour
)

// usageSource says where the usage pages' numbers come from.
const usageSource = "settled rows of the credit ledger (the query GET /v1/usage answers from), per UTC day, for requests created in the range"

// errRange is a from/to pair the console refuses.
var errRange = errors.New("bad range")

// dayUsage is one model's usage on one UTC day.
type dayUsage struct {
	Day time.Time
	ledger.ModelUsage
}

// usageData is a team's usage over [From, To) (To the midnight after the
// range's last day): per day and model, and in total per model.
type usageData struct {
	From, To time.Time
	Days     []dayUsage
	Totals   []ledger.ModelUsage
}

// usageRange reads from and to, the range's first and last UTC days (both
// included, as the page's date fields say), from the query; the default
// is this month so far, today included. It returns [from, end): end is
// the midnight after to, as GET /v1/usage's exclusive to.
func (c *Console) usageRange(ctx *gin.Context) (from, end time.Time, err error) {
	now := c.cfg.Clock.Now().UTC()
	from = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	to := now.Truncate(day)
	if s := ctx.Query("from"); s != "" {
		if from, err = time.Parse(time.DateOnly, s); err != nil {
			return from, to.Add(day), fmt.Errorf("%w: from must be a date (YYYY-MM-DD)", errRange)
		}
	}
	if s := ctx.Query("to"); s != "" {
		if to, err = time.Parse(time.DateOnly, s); err != nil {
			return from, to.Add(day), fmt.Errorf("%w: to must be a date (YYYY-MM-DD)", errRange)
		}
	}
	end = to.Add(day)
	switch {
	case to.Before(from):
		return from, end, fmt.Errorf("%w: to must not be before from", errRange)
	case end.Sub(from) > maxRangeDays*day:
		return from, end, fmt.Errorf("%w: a range is at most %d days", errRange, maxRangeDays)
	}
	return from, end, nil
}

// readUsage reads the team's usage over [from, to): the totals with the
// same call as GET /v1/usage, and the days with one UsageByDay call (both
// read the ledger's daily rollup, not its rows).
func (c *Console) readUsage(ctx context.Context, teamID int64, from, to time.Time) (usageData, error) {
	ctx, cancel := c.budget(ctx)
	defer cancel()
	u := usageData{From: from, To: to}
	var err error
	if u.Totals, err = c.cfg.Ledger.Usage(ctx, teamID, from, to); err != nil {
		return u, err
	}
	if len(u.Totals) == 0 {
		return u, nil
	}
	days, err := c.cfg.Ledger.UsageByDay(ctx, teamID, from, to)
	if err != nil {
		return u, err
	}
	for _, d := range days {
		u.Days = append(u.Days, dayUsage{Day: d.Day, ModelUsage: d.ModelUsage})
	}
	return u, nil
}

// usageView is the usage page's data.
type usageView struct {
	pageView
	usageData
	// FromText and ToText are the range's first and last day, both
	// included.
	FromText, ToText string
	Problem          string
	Total            ledger.ModelUsage
	// Glance is the headline: this month against the last, whatever the
	// range.
	Glance glance
	// Colors are the models' colours in the charts, for the table's
	// swatches.
	Colors map[string]string
}

// usagePage shows the team's headline (this month against the last, the
// projection and the balance's runway), then its tokens and cost per
// model per day over a range, as two charts and a table.
func (c *Console) usagePage(ctx *gin.Context) {
	se := current(ctx)
	v := usageView{pageView: c.view(se, "Usage", "usage", usageSource)}
	from, to, rerr := c.usageRange(ctx)
	v.FromText, v.ToText = from.Format(time.DateOnly), to.Add(-day).Format(time.DateOnly)
	// One budget for the page's reads: a database that freezes between
	// the headline and the range still answers 503 within it.
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	var err error
	if v.Glance, err = c.readGlance(rctx, se.Principal.TeamID, c.cfg.Clock.Now()); err == nil && rerr == nil {
		v.usageData, err = c.readUsage(rctx, se.Principal.TeamID, from, to)
	}
	if err != nil {
		c.cfg.Logger.Warn("console usage unavailable", "err", err)
		c.renderUnavailable(ctx, se, "Usage cannot be read: the ledger database is not answering.")
		return
	}
	if rerr != nil {
		v.Problem = rerr.Error()
		c.render(ctx, http.StatusBadRequest, "usage", v)
		return
	}
	v.Colors = map[string]string{}
	for _, t := range v.Totals {
		v.Colors[t.Model] = modelColor(t.Model)
		addUsage(&v.Total, t)
	}
	v.ReadAt = c.cfg.Clock.Now().UTC()
	c.render(ctx, http.StatusOK, "usage", v)
}

// usageCSV downloads the page's table: one line per day and model.
func (c *Console) usageCSV(ctx *gin.Context) {
	se := current(ctx)
	from, to, err := c.usageRange(ctx)
	if err != nil {
		ctx.String(http.StatusBadRequest, "%s\n", err)
		return
	}
	u, err := c.readUsage(ctx.Request.Context(), se.Principal.TeamID, from, to)
	if err != nil {
		ctx.Header("Retry-After", storeDownRetry)
		ctx.String(http.StatusServiceUnavailable, "the ledger database is not answering\n")
		return
	}
	w := startCSV(ctx, "usage", from, to)
	_ = w.Write([]string{"day", "model", "requests", "prompt_tokens", "completion_tokens", "cost_microcredits"})
	for _, d := range u.Days {
		_ = w.Write([]string{d.Day.Format(time.DateOnly), csvSafe(d.Model), strconv.FormatInt(d.Requests, 10),
			strconv.FormatInt(d.PromptTokens, 10), strconv.FormatInt(d.CompletionTokens, 10), strconv.FormatInt(d.CostMicrocredits, 10)})
	}
	w.Flush()
}

// csvSafe keeps a spreadsheet from reading a cell as a formula.
func csvSafe(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@') {
		return "'" + s
	}
	return s
}

// usageChart serves one chart of the usage page as SVG: metric "tokens"
// (prompt plus completion) or "cost" (credits), per model per day.
func (c *Console) usageChart(ctx *gin.Context) {
	se := current(ctx)
	from, to, err := c.usageRange(ctx)
	if err != nil {
		ctx.String(http.StatusBadRequest, "%s\n", err)
		return
	}
	metric := ctx.Query("metric")
	if metric != "tokens" && metric != "cost" {
		ctx.String(http.StatusBadRequest, "metric must be tokens or cost\n")
		return
	}
	u, err := c.readUsage(ctx.Request.Context(), se.Principal.TeamID, from, to)
	if err != nil {
		ctx.Header("Retry-After", storeDownRetry)
		ctx.String(http.StatusServiceUnavailable, "the ledger database is not answering\n")
		return
	}
	svg, err := usageSVG(u, metric)
	if err != nil {
		c.cfg.Logger.Error("console chart failed", "err", err)
		ctx.String(http.StatusInternalServerError, "chart failed\n")
		return
	}
	ctx.Data(http.StatusOK, "image/svg+xml", svg)
}

// addUsage adds u's counts and cost to total.
func addUsage(total *ledger.ModelUsage, u ledger.ModelUsage) {
	total.Requests += u.Requests
	total.PromptTokens += u.PromptTokens
	total.CompletionTokens += u.CompletionTokens
	total.CostMicrocredits += u.CostMicrocredits
}

// startCSV answers with a CSV download named for name and the range
// [from, to) by its first and last day, and returns its writer.
func startCSV(ctx *gin.Context, name string, from, to time.Time) *csv.Writer {
	ctx.Header("Content-Type", "text/csv; charset=utf-8")
	ctx.Header("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s-%s.csv"`, name, from.Format(time.DateOnly), to.Add(-day).Format(time.DateOnly)))
	return csv.NewWriter(ctx.Writer)
}
