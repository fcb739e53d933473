package console

import (
	"encoding/xml"
	"fmt"
	"math"
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

// svgRect is a bar of a usage chart as its attributes give it.
type svgRect struct {
	Day    string  `xml:"data-day,attr"`
	Model  string  `xml:"data-model,attr"`
	Value  float64 `xml:"data-value,attr"`
	Y      float64 `xml:"y,attr"`
	Height float64 `xml:"height,attr"`
	Fill   string  `xml:"fill,attr"`
}

// svgDoc is what TestUsageSVGStacksBars reads of a chart.
type svgDoc struct {
	Rects []svgRect `xml:"rect"`
	Texts []struct {
		Class string `xml:"class,attr"`
		Text  string `xml:",chardata"`
	} `xml:"text"`
}

// TestUsageSVGStacksBars: each day is one bar, its models stacked without
// gap from the axis in the totals' order, each model in its own colour in
// both charts and in the legend; a day with no usage draws nothing (no
// line ramps into it); the y axis has rounded ticks with units, the x
// axis ISO dates; no element carries an inline style the CSP would block.
func TestUsageSVGStacksBars(t *testing.T) {
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	u := usageData{From: from, To: from.Add(3 * day),
		Totals: []ledger.ModelUsage{{Model: "llama-8b"}, {Model: "qwen-32b"}},
		Days: []dayUsage{
			{Day: from, ModelUsage: ledger.ModelUsage{Model: "llama-8b", PromptTokens: 1500, CompletionTokens: 500, CostMicrocredits: 450}},
			{Day: from, ModelUsage: ledger.ModelUsage{Model: "qwen-32b", PromptTokens: 4000, CompletionTokens: 1000, CostMicrocredits: 900}},
			{Day: from.Add(2 * day), ModelUsage: ledger.ModelUsage{Model: "llama-8b", PromptTokens: 400, CompletionTokens: 100, CostMicrocredits: 90}},
		}}
	cases := []struct {
		metric string
		want   map[string]float64 // "day model" -> value
		ticks  []string
	}{
		{"tokens", map[string]float64{"2026-03-01 llama-8b": 2000, "2026-03-01 qwen-32b": 5000, "2026-03-03 llama-8b": 500},
			[]string{"0", "2k", "4k", "6k", "8k"}},
		{"cost", map[string]float64{"2026-03-01 llama-8b": 0.00045, "2026-03-01 qwen-32b": 0.0009, "2026-03-03 llama-8b": 0.00009},
			[]string{"0.0000", "0.0005", "0.0010", "0.0015"}},
	}
	for _, tc := range cases {
		t.Run(tc.metric, func(t *testing.T) {
			svg, err := usageSVG(u, tc.metric)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(svg), "style=") {
				t.Errorf("the chart carries an inline style:\n%s", svg)
			}
			var doc svgDoc
			if err := xml.Unmarshal(svg, &doc); err != nil {
				t.Fatalf("not XML: %v\n%s", err, svg)
			}
			got := map[string]float64{}
			bottom := map[string]float64{} // a day's stack's top so far, from the axis up
			var legend []string
			for _, r := range doc.Rects {
				switch {
				case r.Day != "":
					if b, ok := bottom[r.Day]; ok && math.Abs(r.Y+r.Height-b) > 0.01 {
						t.Errorf("%s %s starts at %.2f, the stack below ends at %.2f", r.Day, r.Model, r.Y+r.Height, b)
					}
					bottom[r.Day] = r.Y
					got[r.Day+" "+r.Model] = r.Value
					if r.Fill != modelColor(r.Model) {
						t.Errorf("%s %s is %s, the model's colour is %s", r.Day, r.Model, r.Fill, modelColor(r.Model))
					}
				case r.Fill != "#ffffff":
					legend = append(legend, r.Fill)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("bars %v, want %v", got, tc.want)
			}
			if want := []string{modelColor("llama-8b"), modelColor("qwen-32b")}; fmt.Sprint(legend) != fmt.Sprint(want) {
				t.Errorf("legend swatches %v, want %v", legend, want)
			}
			var ticks, days []string
			for _, x := range doc.Texts {
				switch x.Class {
				case "tick":
					ticks = append(ticks, x.Text)
				case "day":
					days = append(days, x.Text)
				}
			}
			if fmt.Sprint(ticks) != fmt.Sprint(tc.ticks) {
				t.Errorf("y ticks %q, want %q", ticks, tc.ticks)
			}
			if want := []string{"2026-03-01", "2026-03-02", "2026-03-03"}; fmt.Sprint(days) != fmt.Sprint(want) {
				t.Errorf("x labels %q, want %q", days, want)
			}
		})
	}
	if modelColor("llama-8b") == modelColor("qwen-32b") {
		t.Error("the two models of the docs' screenshot share a colour")
	}
}

// TestTickLabels: the y axis's ticks are round numbers of 1, 2 or 5 times
// a power of ten, in k or M for tokens.
func TestTickLabels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		peak   float64
		metric string
		want   []string
	}{
		{"nothing", 0, "tokens", []string{"0", "1"}},
		{"a few tokens", 7, "tokens", []string{"0", "2", "4", "6", "8"}},
		{"under a thousand", 950, "tokens", []string{"0", "0.2k", "0.4k", "0.6k", "0.8k", "1.0k"}},
		{"thousands", 7300, "tokens", []string{"0", "2k", "4k", "6k", "8k"}},
		{"millions", 3_400_000, "tokens", []string{"0", "1M", "2M", "3M", "4M"}},
		{"half millions", 1_900_000, "tokens", []string{"0", "0.5M", "1.0M", "1.5M", "2.0M"}},
		{"credits", 12.5, "cost", []string{"0", "2", "4", "6", "8", "10", "12", "14"}},
		{"cents", 0.031, "cost", []string{"0.00", "0.01", "0.02", "0.03", "0.04"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step, steps := niceTicks(tc.peak)
			var got []string
			for k := 0; k <= steps; k++ {
				got = append(got, chartMetrics[tc.metric].label(step*float64(k), step, step*float64(steps)))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("ticks for %v: %q, want %q", tc.peak, got, tc.want)
			}
		})
	}
}
