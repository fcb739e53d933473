package twin

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Chart geometry, in SVG units.
const (
	chartWidth   = 900
	chartPlot    = 240 // the series' panel
	chartRequest = 14  // one request's row
	chartLeft    = 50
	chartRight   = 190 // room for the legend
	chartTop     = 30
)

// palette colours the series in turn.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// SVG draws the timeline: each series as a step line over twin time
// (real-world seconds on the axis too), the scenario's events as
// vertical marks, and below, each request as a bar from its sending to
// its first token (grey: no token).
func (tl *Timeline) SVG(title string, series []Series) []byte {
	samples, requests, events := tl.Samples(), tl.Requests(), tl.Events()
	end := 1.0
	if n := len(samples); n > 0 {
		end = max(end, samples[n-1].At.Seconds())
	}
	for _, r := range requests {
		end = max(end, r.Sent.Seconds(), r.FirstToken.Seconds())
	}
	top := 1.0
	for _, s := range series {
		for _, smp := range samples {
			top = max(top, s.Value(smp))
		}
	}
	top = math.Ceil(top)
	plotW := float64(chartWidth - chartLeft - chartRight)
	x := func(sec float64) float64 { return chartLeft + plotW*sec/end }
	y := func(v float64) float64 { return chartTop + chartPlot*(1-v/top) }
	height := chartTop + chartPlot + 40 + chartRequest*len(requests) + 20

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="18" font-size="14">%s</text>`+"\n", chartLeft, html.EscapeString(title))
	// Axes and grid.
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", chartLeft, y(0), x(end), y(0))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="black"/>`+"\n", chartLeft, chartTop, chartLeft, y(0))
	step := math.Max(1, math.Ceil(top/5))
	for v := 0.0; v <= top; v += step {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%g</text><line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n",
			chartLeft-4, y(v)+4, v, chartLeft, y(v), x(end), y(v))
	}
	tick := niceStep(end / 8)
	for t := 0.0; t <= end; t += tick {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%gs</text><text x="%.1f" y="%.1f" text-anchor="middle" fill="#777">%.0fs real</text>`+"\n",
			x(t), y(0)+14, t, x(t), y(0)+26, tl.c.Real(secondsDur(t)).Seconds())
	}
	// Events.
	for _, e := range events {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#aaa" stroke-dasharray="3,3"><title>%s</title></line>`+"\n",
			x(e.At.Seconds()), chartTop, x(e.At.Seconds()), y(0), html.EscapeString(e.What))
	}
	// Series.
	for i, s := range series {
		colour := palette[i%len(palette)]
		var pts []string
		prev := math.NaN()
		for _, smp := range samples {
			v := s.Value(smp)
			if !math.IsNaN(prev) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(smp.At.Seconds()), y(prev)))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(smp.At.Seconds()), y(v)))
			prev = v
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", colour, strings.Join(pts, " "))
		ly := chartTop + 14*i
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"/><text x="%.1f" y="%d">%s</text>`+"\n",
			x(end)+10, ly, x(end)+25, ly, colour, x(end)+30, ly+4, html.EscapeString(s.Name))
	}
	// Requests.
	base := int(y(0)) + 40
	for i, r := range requests {
		ry := base + chartRequest*i
		endAt, colour := r.FirstToken.Seconds(), "#2ca02c"
		if r.FirstToken == 0 {
			endAt, colour = end, "#bbb"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %d after %d attempt(s)</title></rect>`+"\n",
			x(r.Sent.Seconds()), ry, math.Max(1, x(endAt)-x(r.Sent.Seconds())), chartRequest-4, colour, html.EscapeString(r.Model), r.Status, r.Attempts)
	}
	if len(requests) > 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d">requests: sent → first token</text>`+"\n", chartLeft, base-6)
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// niceStep rounds a tick interval up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
