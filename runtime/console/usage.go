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

// usageData is a team's usage over [From, To): per day and model, and in
// total per model.
type usageData struct {
	From, To time.Time
	Days     []dayUsage
	Totals   []ledger.ModelUsage
}

// usageRange reads from and to (dates, to exclusive) from the query; the
// default is this month so far.
func (c *Console) usageRange(ctx *gin.Context) (time.Time, time.Time, error) {
	now := c.cfg.Now().UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	to := now.Truncate(day).Add(day)
	var err error
	if s := ctx.Query("from"); s != "" {
		if from, err = time.Parse(time.DateOnly, s); err != nil {
			return from, to, fmt.Errorf("%w: from must be a date (YYYY-MM-DD)", errRange)
		}
	}
	if s := ctx.Query("to"); s != "" {
		if to, err = time.Parse(time.DateOnly, s); err != nil {
			return from, to, fmt.Errorf("%w: to must be a date (YYYY-MM-DD)", errRange)
		}
	}
	switch {
	case !to.After(from):
		return from, to, fmt.Errorf("%w: to must be after from", errRange)
	case to.Sub(from) > maxRangeDays*day:
		return from, to, fmt.Errorf("%w: a range is at most %d days", errRange, maxRangeDays)
	}
	return from, to, nil
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
	FromText, ToText string
	Problem          string
	Total            ledger.ModelUsage
}

// usagePage shows the team's tokens and cost per model per day over a
// range, as two charts and a table.
func (c *Console) usagePage(ctx *gin.Context) {
	se := current(ctx)
	v := usageView{pageView: c.view(se, "Usage", "usage", usageSource)}
	from, to, err := c.usageRange(ctx)
	v.FromText, v.ToText = from.Format(time.DateOnly), to.Format(time.DateOnly)
	if err != nil {
		v.Problem = err.Error()
		c.render(ctx, http.StatusBadRequest, "usage", v)
		return
	}
	if v.usageData, err = c.readUsage(ctx.Request.Context(), se.Principal.TeamID, from, to); err != nil {
		c.cfg.Logger.Warn("console usage unavailable", "err", err)
		c.renderUnavailable(ctx, se, "Usage cannot be read: the ledger database is not answering.")
		return
	}
	for _, t := range v.Totals {
		v.Total.Requests += t.Requests
		v.Total.PromptTokens += t.PromptTokens
		v.Total.CompletionTokens += t.CompletionTokens
		v.Total.CostMicrocredits += t.CostMicrocredits
	}
	v.ReadAt = c.cfg.Now().UTC()
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
	ctx.Header("Content-Type", "text/csv; charset=utf-8")
	ctx.Header("Content-Disposition", fmt.Sprintf(`attachment; filename="usage-%s-%s.csv"`, from.Format(time.DateOnly), to.Format(time.DateOnly)))
	w := csv.NewWriter(ctx.Writer)
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
	ctx.Data(http.StatusOK, "image/svg+xml", presentationAttributes(svg))
}
