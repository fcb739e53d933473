package console

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"sync"
	"time"

	"github.com/golang/freetype/truetype"
	chart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"
	"github.com/wcharczuk/go-chart/v2/roboto"
)

// chartFont is go-chart's own default font, parsed once here: the
// library's lazy GetDefaultFont reads its global without the lock it
// writes it under, a data race when two charts draw at once (the usage
// page loads two). A chart given a Font never calls it.
var chartFont = sync.OnceValues(func() (*truetype.Font, error) { return truetype.Parse(roboto.Roboto) })

// Chart size in pixels: wide enough for a quarter of daily points.
const (
	chartWidth  = 960
	chartHeight = 320
)

// seriesColors tell models apart; the rest reuse them.
var seriesColors = []drawing.Color{
	{R: 0x1f, G: 0x6f, B: 0xb4, A: 255}, {R: 0xd9, G: 0x5f, B: 0x02, A: 255}, {R: 0x1b, G: 0x9e, B: 0x77, A: 255},
	{R: 0x75, G: 0x70, B: 0xb3, A: 255}, {R: 0xe7, G: 0x29, B: 0x8a, A: 255}, {R: 0x66, G: 0x66, B: 0x66, A: 255},
}

// usageSVG draws one line per model over the range's days: tokens (prompt
// plus completion) or cost in credits, each day's total. go-chart writes
// text into the SVG unescaped, so every label is escaped here first; the
// page shows the SVG as an image, where no script ever runs.
func usageSVG(u usageData, metric string) ([]byte, error) {
	var days []time.Time
	for d := u.From; d.Before(u.To); d = d.Add(day) {
		days = append(days, d)
	}
	index := map[string][]float64{}
	var models []string
	for _, t := range u.Totals {
		models = append(models, t.Model)
		index[t.Model] = make([]float64, len(days))
	}
	font, err := chartFont()
	if err != nil {
		return nil, fmt.Errorf("usage chart font: %w", err)
	}
	peak := 0.0
	for _, d := range u.Days {
		i := int(d.Day.Sub(u.From) / day)
		vals, ok := index[d.Model]
		if !ok || i < 0 || i >= len(days) {
			continue
		}
		if metric == "cost" {
			vals[i] = float64(d.CostMicrocredits) / 1e6
		} else {
			vals[i] = float64(d.PromptTokens) + float64(d.CompletionTokens)
		}
		peak = math.Max(peak, vals[i])
	}
	if peak == 0 {
		peak = 1 // go-chart refuses an empty range
	}
	xs := days
	if len(days) == 1 {
		// go-chart draws a line through two points at least: a one-day
		// range is drawn flat across its day.
		xs = []time.Time{u.From, u.To}
		for _, m := range models {
			index[m] = append(index[m], index[m][0])
		}
	}
	g := chart.Chart{
		Width: chartWidth, Height: chartHeight, Font: font,
		Background: chart.Style{Padding: chart.Box{Top: 20, Left: 20, Right: 20, Bottom: 20}},
		XAxis: chart.XAxis{
			Ticks: dayTicks(xs),
			Range: &chart.ContinuousRange{Min: chart.TimeToFloat64(xs[0]), Max: chart.TimeToFloat64(xs[len(xs)-1])},
		},
		YAxis: chart.YAxis{
			Name:           html.EscapeString(map[string]string{"cost": "credits", "tokens": "tokens"}[metric]),
			Range:          &chart.ContinuousRange{Min: 0, Max: peak * 1.1},
			ValueFormatter: map[string]chart.ValueFormatter{"cost": costTick, "tokens": tokenTick}[metric],
		},
		// No series uses the secondary axis; shown, go-chart draws it with
		// an empty range as a stray line at the left.
		YAxisSecondary: chart.YAxis{Style: chart.Style{Hidden: true}},
	}
	for i, m := range models {
		col := seriesColors[i%len(seriesColors)]
		g.Series = append(g.Series, chart.TimeSeries{
			Name:    html.EscapeString(m),
			XValues: xs,
			YValues: index[m],
			Style:   chart.Style{StrokeColor: col, StrokeWidth: 2, DotColor: col, DotWidth: 3},
		})
	}
	g.Elements = []chart.Renderable{chart.LegendLeft(&g)}
	var buf bytes.Buffer
	if err := g.Render(chart.SVG, &buf); err != nil {
		return nil, fmt.Errorf("usage chart: %w", err)
	}
	return buf.Bytes(), nil
}

// maxDayTicks bounds the labelled days on the x axis: past a month the
// labels would overlap, so every few days is labelled.
const maxDayTicks = 16

// dayTicks labels the days of the x axis, in UTC. go-chart takes the
// axis's range from its ticks, so the first and last point always get one.
func dayTicks(xs []time.Time) []chart.Tick {
	step := max((len(xs)+maxDayTicks-1)/maxDayTicks, 1)
	var ticks []chart.Tick
	for i := 0; i < len(xs); i += step {
		if i+step >= len(xs) {
			i = len(xs) - 1
		}
		ticks = append(ticks, chart.Tick{Value: chart.TimeToFloat64(xs[i]), Label: xs[i].UTC().Format("01-02")})
	}
	return ticks
}

// costTick shows credits to the micro-credit: a day's cost is often far
// below one credit.
func costTick(v any) string {
	f, _ := v.(float64)
	return fmt.Sprintf("%.6f", f)
}

// tokenTick shows whole tokens.
func tokenTick(v any) string {
	f, _ := v.(float64)
	return fmt.Sprintf("%.0f", f)
}
