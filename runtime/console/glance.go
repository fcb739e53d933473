package console

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/llmplat/llmplat/runtime/ledger"
)

// rateWindow is the trailing window whose spend is "the current rate" of
// the headline's projection and runway: a week smooths a weekday/weekend
// rhythm and still answers on the first days of a month, which a
// month-to-date average would extrapolate from a few hours.
const rateWindow = 7 * day

// period is a range the headline read, with the team's totals over it.
type period struct {
	From, To time.Time
	ledger.ModelUsage
}

// Tokens is the period's prompt plus completion tokens.
func (p period) Tokens() int64 { return p.PromptTokens + p.CompletionTokens }

// glance is the headline of the usage page: this month so far against the
// same days of last month, last month whole, the spend rate of the last
// rateWindow, and what it means for the month's end and the balance.
type glance struct {
	Now time.Time
	// Month is this month so far, [1st 00:00 UTC, Now); SameDays the same
	// stretch of last month, from its 1st for as long as this month has
	// run (at most the whole month); LastMonth the whole of last month;
	// Recent the rateWindow before Now.
	Month, SameDays, LastMonth, Recent period
	// MonthEnd is when this month ends (the 1st of the next, 00:00 UTC).
	MonthEnd time.Time
	Balance  ledger.Balance
}

// readGlance reads the headline for the team at now: four Usage calls
// (the query GET /v1/usage answers from) and the balance.
func (c *Console) readGlance(ctx context.Context, teamID int64, now time.Time) (glance, error) {
	ctx, cancel := c.budget(ctx)
	defer cancel()
	now = now.UTC()
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	lastStart := monthStart.AddDate(0, -1, 0)
	g := glance{Now: now, MonthEnd: monthStart.AddDate(0, 1, 0),
		Month:     period{From: monthStart, To: now},
		SameDays:  period{From: lastStart, To: minTime(lastStart.Add(now.Sub(monthStart)), monthStart)},
		LastMonth: period{From: lastStart, To: monthStart},
		Recent:    period{From: now.Add(-rateWindow), To: now},
	}
	for _, p := range []*period{&g.Month, &g.SameDays, &g.LastMonth, &g.Recent} {
		rows, err := c.cfg.Ledger.Usage(ctx, teamID, p.From, p.To)
		if err != nil {
			return g, err
		}
		for _, r := range rows {
			p.Requests += r.Requests
			p.PromptTokens += r.PromptTokens
			p.CompletionTokens += r.CompletionTokens
			p.CostMicrocredits += r.CostMicrocredits
		}
	}
	var err error
	g.Balance, err = c.cfg.Ledger.Balance(ctx, teamID)
	return g, err
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// DailyRate is the spend per day at the current rate, in micro-credits:
// the Recent window's cost over its length.
func (g glance) DailyRate() float64 {
	return float64(g.Recent.CostMicrocredits) / (float64(g.Recent.To.Sub(g.Recent.From)) / float64(day))
}

// DaysLeftInMonth is the time from Now to the month's end, in days.
func (g glance) DaysLeftInMonth() float64 { return float64(g.MonthEnd.Sub(g.Now)) / float64(day) }

// Projected is the month's spend at its end if the current rate holds:
// this month so far plus DailyRate for the days left, in micro-credits.
func (g glance) Projected() int64 {
	return g.Month.CostMicrocredits + int64(math.Round(g.DailyRate()*g.DaysLeftInMonth()))
}

// Runway says how long the available balance lasts at DailyRate: "no
// spend" without a rate, "nothing available" without a balance, else the
// days and the date it runs out.
func (g glance) Runway() string {
	rate := g.DailyRate()
	switch {
	case g.Balance.Available <= 0:
		return "— (nothing available)"
	case rate <= 0:
		return "— (no spend in the last 7 days)"
	}
	days := float64(g.Balance.Available) / rate
	if days > 3650 {
		return "over 10 years at the current rate"
	}
	end := g.Now.Add(time.Duration(days * float64(day)))
	return fmt.Sprintf("about %s days at the current rate (to %s)", strconv.FormatFloat(math.Floor(days), 'f', 0, 64), end.Format(time.DateOnly))
}

// versus compares a figure with the same days of last month, shown by
// show: "+12 % vs last month to date (3.00)", or words where a percentage
// would mislead.
func versus(now, before int64, show func(int64) string) string {
	const against = "vs last month to date"
	switch {
	case before == 0 && now == 0:
		return "none last month to date either"
	case before == 0:
		return "none last month to date"
	}
	pct := math.Round(float64(now-before) / float64(before) * 100)
	if pct == 0 {
		return fmt.Sprintf("unchanged %s (%s)", against, show(before))
	}
	return fmt.Sprintf("%+.0f %% %s (%s)", pct, against, show(before))
}

// shortCredits shows micro-credits as credits for a headline: two
// decimals from one credit up, six below, where two would show 0.00.
func shortCredits(micro int64) string {
	if micro > -1_000_000 && micro < 1_000_000 {
		return formatCredits(micro)
	}
	sign, u := "", uint64(micro)
	if micro < 0 {
		sign, u = "-", uint64(-(micro+1))+1
	}
	cents := (u + 5_000) / 10_000
	return fmt.Sprintf("%s%s.%02d", sign, formatInt(int64(cents/100)), cents%100)
}

// Credits is the period's spend for a headline.
func (p period) Credits() string { return shortCredits(p.CostMicrocredits) }

// SpendVersus, RequestsVersus and TokensVersus compare this month so far
// with the same days of last month.
func (g glance) SpendVersus() string {
	return versus(g.Month.CostMicrocredits, g.SameDays.CostMicrocredits, shortCredits)
}
func (g glance) RequestsVersus() string {
	return versus(g.Month.Requests, g.SameDays.Requests, formatInt)
}
func (g glance) TokensVersus() string {
	return versus(g.Month.Tokens(), g.SameDays.Tokens(), formatInt)
}

// ProjectedCredits and AvailableCredits are Projected and the available
// balance for a headline; RateCredits is DailyRate.
func (g glance) ProjectedCredits() string { return shortCredits(g.Projected()) }
func (g glance) AvailableCredits() string { return shortCredits(g.Balance.Available) }
func (g glance) RateCredits() string      { return shortCredits(int64(math.Round(g.DailyRate()))) }
