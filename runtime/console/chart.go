package console

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"html"
	"math"
	"strconv"
	"time"
)

// Chart size in pixels: wide enough for a quarter of daily bars.
const (
	chartWidth  = 960
	chartHeight = 320
	// Margins around the plot: room for the y axis's labels and title on
	// the left, the dates below, and the legend's rows above.
	chartLeft, chartRight, chartBottom = 80, 20, 36
	legendRow                          = 18
	// maxDayLabels bounds the dated bars: ten ISO dates fit the width.
	maxDayLabels = 10
	// yTicks is about how many steps the y axis is cut into.
	yTicks = 4
)

// palette holds the models' colours (Tableau 10: told apart in print and
// by most colour-blind readers). A model's colour comes from its name
// alone, so it is the same in both charts, the table's swatch and every
// range; two models may share one, and the legend and table name them.
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// modelColor is the model's colour: its name's FNV-1a hash into palette.
func modelColor(model string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(model)) // a hash.Hash never fails to write
	return palette[h.Sum32()%uint32(len(palette))]
}

// chartMetric is what a chart draws per model and day, and how its axis
// reads.
type chartMetric struct {
	title string
	value func(dayUsage) float64
	label func(v, step, top float64) string
	unit  func(v float64) string
}

var chartMetrics = map[string]chartMetric{
	"tokens": {title: "tokens per day",
		value: func(d dayUsage) float64 { return float64(d.PromptTokens) + float64(d.CompletionTokens) },
		label: tokenLabel, unit: func(v float64) string { return formatInt(int64(v)) + " tokens" }},
	"cost": {title: "credits per day",
		value: func(d dayUsage) float64 { return float64(d.CostMicrocredits) / 1e6 },
		label: func(v, step, _ float64) string { return strconv.FormatFloat(v, 'f', decimals(step), 64) },
		unit:  func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) + " credits" }},
}

// usageSVG draws the range's days as bars, one per day, stacked by model
// in the order of the totals (by name): tokens (prompt plus completion)
// or cost in credits. It writes the SVG itself rather than through a
// charting library: go-chart, which drew lines here before, writes every
// style as an inline style attribute, which the console's CSP blocks when
// the image is opened on its own; here every colour and font is a
// presentation attribute. Every name is escaped; the page shows the SVG
// as an image, where no script runs anyway.
func usageSVG(u usageData, metric string) ([]byte, error) {
	m, ok := chartMetrics[metric]
	if !ok {
		return nil, fmt.Errorf("usage chart: no metric %q", metric)
	}
	n := int(u.To.Sub(u.From) / day)
	if n < 1 {
		return nil, fmt.Errorf("usage chart: a range of %v", u.To.Sub(u.From))
	}
	stacks := make([]map[string]float64, n)
	totals := make([]float64, n)
	for _, d := range u.Days {
		i := int(d.Day.Sub(u.From) / day)
		if i < 0 || i >= n {
			continue
		}
		if stacks[i] == nil {
			stacks[i] = map[string]float64{}
		}
		v := m.value(d)
		stacks[i][d.Model] += v
		totals[i] += v
	}
	peak := 0.0
	for _, t := range totals {
		peak = math.Max(peak, t)
	}
	step, steps := niceTicks(peak)
	top := step * float64(steps)

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="system-ui, sans-serif" font-size="12" fill="#1d232a">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", chartWidth, chartHeight)
	plotTop := legend(&b, u) + 8
	x0, x1, y1 := float64(chartLeft), float64(chartWidth-chartRight), float64(chartHeight-chartBottom)
	y := func(v float64) float64 { return y1 - v/top*(y1-plotTop) }

	// The y axis: a rounded tick every step, a grid line across.
	for k := 0; k <= steps; k++ {
		v := step * float64(k)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d6dbe1" stroke-width="1"/>`+"\n", x0, y(v), x1, y(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" class="tick">%s</text>`+"\n", x0-6, y(v)+4, html.EscapeString(m.label(v, step, top)))
	}
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n",
		(plotTop+y1)/2, (plotTop+y1)/2, html.EscapeString(m.title))

	// The bars: one slot per day, the models stacked from the axis up.
	slot := (x1 - x0) / float64(n)
	width := math.Max(slot*0.7, 1)
	labelEvery := (n + maxDayLabels - 1) / maxDayLabels
	for i := range n {
		dayAt := u.From.Add(time.Duration(i) * day)
		x := x0 + float64(i)*slot + (slot-width)/2
		base := 0.0
		for _, t := range u.Totals {
			v := stacks[i][t.Model]
			if v <= 0 {
				continue
			}
			name := html.EscapeString(t.Model)
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s" data-day="%s" data-model="%s" data-value="%s"><title>%s %s: %s</title></rect>`+"\n",
				x, y(base+v), width, y(base)-y(base+v), modelColor(t.Model), dayAt.Format(time.DateOnly), name,
				strconv.FormatFloat(v, 'g', -1, 64), dayAt.Format(time.DateOnly), name, html.EscapeString(m.unit(v)))
			base += v
		}
		if i%labelEvery == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" class="day">%s</text>`+"\n", x+width/2, y1+18, dayAt.Format(time.DateOnly))
		}
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#4d5966" stroke-width="1"/>`+"\n", x0, y1, x1, y1)
	b.WriteString("</svg>\n")
	return b.Bytes(), nil
}

// legend writes a swatch and the name of every model of the range, in
// rows across the top, and returns where the rows end.
func legend(b *bytes.Buffer, u usageData) float64 {
	const charWidth, gap = 7.0, 18.0 // a 12 px font's average character, and the space between entries
	x, row := float64(chartLeft), 0
	for _, t := range u.Totals {
		w := 16 + charWidth*float64(len([]rune(t.Model)))
		if x+w > chartWidth-chartRight && x > chartLeft {
			x, row = chartLeft, row+1
		}
		top := float64(8 + row*legendRow)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s" class="swatch"/>`+"\n", x, top, modelColor(t.Model))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="legend">%s</text>`+"\n", x+16, top+10, html.EscapeString(t.Model))
		x += w + gap
	}
	return float64(8 + (row+1)*legendRow)
}

// niceTicks cuts [0, peak] into about yTicks steps: the step is the one of
// 1, 2 or 5 times a power of ten nearest peak/yTicks; it returns the step
// and how many of them reach peak.
func niceTicks(peak float64) (step float64, steps int) {
	if peak <= 0 || math.IsNaN(peak) || math.IsInf(peak, 0) {
		return 1, 1
	}
	raw := peak / yTicks
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, f := range []float64{1, 2, 5, 10} {
		if s := f * mag; step == 0 || math.Abs(math.Log(s/raw)) < math.Abs(math.Log(step/raw)) {
			step = s
		}
	}
	return step, max(int(math.Ceil(peak/step-1e-9)), 1)
}

// decimals is how many decimals show a multiple of step exactly.
func decimals(step float64) int {
	d := 0
	for ; d < 6 && math.Abs(step*math.Pow(10, float64(d))-math.Round(step*math.Pow(10, float64(d)))) > 1e-6; d++ {
	}
	return d
}

// tokenLabel shows a token count in k or M, by the size of the axis's
// top, to as many decimals as its step needs.
func tokenLabel(v, step, top float64) string {
	unit, scale := "", 1.0
	switch {
	case top >= 1e6:
		unit, scale = "M", 1e6
	case top >= 1e3:
		unit, scale = "k", 1e3
	}
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v/scale, 'f', decimals(step/scale), 64) + unit
}
