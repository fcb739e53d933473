package console

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/ledger"
)

// TestUsageSVG draws the charts of a few ranges, at once, as the usage
// page's two images load: each is SVG naming every model, with labels
// escaped, and under -race the drawings share nothing unguarded.
func TestUsageSVG(t *testing.T) {
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		u    usageData
	}{
		{"one day", usageData{From: from, To: from.Add(day),
			Totals: []ledger.ModelUsage{{Model: "llama-8b"}},
			Days:   []dayUsage{{Day: from, ModelUsage: ledger.ModelUsage{Model: "llama-8b", PromptTokens: 10, CostMicrocredits: 5}}}}},
		{"a month, two models, one a markup name", usageData{From: from, To: from.Add(31 * day),
			Totals: []ledger.ModelUsage{{Model: "llama-8b"}, {Model: "<script>x</script>"}},
			Days: []dayUsage{{Day: from.Add(3 * day), ModelUsage: ledger.ModelUsage{Model: "llama-8b", PromptTokens: 10}},
				{Day: from.Add(9 * day), ModelUsage: ledger.ModelUsage{Model: "<script>x</script>", CompletionTokens: 7}}}}},
		{"nothing used", usageData{From: from, To: from.Add(7 * day), Totals: []ledger.ModelUsage{{Model: "llama-8b"}}}},
	}
	var wg sync.WaitGroup
	for _, tc := range cases {
		for _, metric := range []string{"tokens", "cost"} {
			wg.Go(func() {
				svg, err := usageSVG(tc.u, metric)
				if err != nil {
					t.Errorf("%s, %s: %v", tc.name, metric, err)
					return
				}
				s := string(svg)
				if !strings.HasPrefix(s, "<svg") || strings.Contains(s, "<script") {
					t.Errorf("%s, %s: not a safe SVG:\n%.300s", tc.name, metric, s)
				}
				for _, m := range tc.u.Totals {
					if name := strings.ReplaceAll(strings.ReplaceAll(m.Model, "<", "&lt;"), ">", "&gt;"); !strings.Contains(s, name) {
						t.Errorf("%s, %s: the legend lacks %q", tc.name, metric, m.Model)
					}
				}
			})
		}
	}
	wg.Wait()
}
