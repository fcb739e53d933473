package costreport

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// WriteJSON writes r as indented JSON; field names carry their units.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write report json: %w", err)
	}
	return nil
}

// WriteTable writes r for a person: the window and sources, GPU time and
// cost per model, drift per model when engine counts were given, and
// tokens per team. GPU-hours show one decimal, money two, drift three
// decimals of a percent; JSON carries every number unrounded.
func WriteTable(w io.Writer, r Report) error {
	var b strings.Builder
	const day = "2006-01-02 15:04"
	fmt.Fprintf(&b, "Cost and drift report: %s → %s UTC (%s h)\n", r.From.UTC().Format(day), r.To.UTC().Format(day),
		strconv.FormatFloat(r.WindowHours, 'f', -1, 64))
	engine := "none (no drift)"
	if r.EngineTokenSource != "" {
		engine = r.EngineTokenSource
	}
	fmt.Fprintf(&b, "GPU time from %s; engine tokens from %s; drift target %s %%\n\n",
		r.GPUTimeSource, engine, strconv.FormatFloat(r.DriftTarget*100, 'f', -1, 64))
	rows := [][]string{{"model", "GPU-hours", "idle GPU-hours", "idle GPU-hours/week", "requests",
		"prompt tokens", "output tokens", "cost USD", "USD per M output", "billed USD"}}
	for _, m := range append(append([]ModelReport{}, r.Models...), r.Total) {
		rows = append(rows, []string{m.Model, fixed(m.GPUHours, 1), fixed(m.IdleGPUHours, 1),
			fixed(m.IdleGPUHoursPerWeek, 1), grouped(m.Requests), grouped(m.PromptTokens),
			grouped(m.CompletionTokens), fixed(m.CostUSD, 2), optFixed(m.CostPerMillionOutputTokensUSD, 2),
			fixed(m.BilledUSD, 2)})
	}
	table(&b, rows)
	if n := len(r.NodesWithoutGPUs); n > 0 {
		fmt.Fprintf(&b, "\n%d node(s) up in the window registered no GPU and count no GPU-hours: %s\n", n,
			strings.Join(r.NodesWithoutGPUs, ", "))
	}
	if r.EngineTokenSource != "" {
		fmt.Fprintf(&b, "\nLedger drift: settled completion tokens against the engines' %s\n", generationTokensMetric)
		rows = [][]string{{"model", "settled", "engines", "drift", "within " +
			strconv.FormatFloat(r.DriftTarget*100, 'f', -1, 64) + " %"}}
		for _, m := range append(append([]ModelReport{}, r.Models...), r.Total) {
			if m.Drift != nil {
				rows = append(rows, driftRow(m.Model, *m.Drift))
			}
		}
		table(&b, rows)
	}
	b.WriteString("\nTokens by team\n")
	rows = [][]string{{"model", "team", "requests", "prompt tokens", "output tokens", "billed USD"}}
	for _, m := range r.Models {
		for _, t := range m.Teams {
			rows = append(rows, []string{m.Model, t.Team, grouped(t.Requests), grouped(t.PromptTokens),
				grouped(t.CompletionTokens), fixed(float64(t.BilledMicrocredits)/1e6, 2)})
		}
	}
	table(&b, rows)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write report table: %w", err)
	}
	return nil
}

// driftRow is one line of the drift section.
func driftRow(model string, d Drift) []string {
	drift, ok := "unbounded (engines counted none)", "no"
	if d.Drift != nil {
		drift = fmt.Sprintf("%+.3f %%", *d.Drift*100)
	}
	if d.WithinTarget {
		ok = "yes"
	}
	return []string{model, grouped(d.SettledCompletionTokens), grouped(int64(math.Round(d.EngineGenerationTokens))), drift, ok}
}

// table writes rows as aligned columns, indented by two spaces.
func table(b *strings.Builder, rows [][]string) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
	}
	_ = tw.Flush() // a strings.Builder does not fail
}

// fixed formats v with dec decimals and thousands separators.
func fixed(v float64, dec int) string {
	s := strconv.FormatFloat(math.Abs(v), 'f', dec, 64)
	whole, frac, _ := strings.Cut(s, ".")
	n, _ := strconv.ParseInt(whole, 10, 64) // whole is digits only
	out := grouped(n)
	if frac != "" {
		out += "." + frac
	}
	if v < 0 && strings.Trim(s, "0.") != "" {
		out = "-" + out
	}
	return out
}

// optFixed is fixed for a value that may be absent.
func optFixed(v *float64, dec int) string {
	if v == nil {
		return "—"
	}
	return fixed(*v, dec)
}

// grouped formats n with thousands separators.
func grouped(n int64) string { return groupPrinter.Sprint(n) }

// groupPrinter prints integers the English way, 1,234,567: golang.org/x/text
// groups the digits (and is safe for concurrent use).
var groupPrinter = message.NewPrinter(language.English)

// Layouts ParseTime accepts, most precise first.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"}

// ParseTime reads a report bound: RFC 3339, or a date or date and minute
// taken as UTC.
func ParseTime(s string) (time.Time, error) {
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: %q is not RFC 3339 (2006-01-02T15:04:05Z) or a date (2006-01-02)", ErrBadWindow, s)
}
