package twin

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Chart geometry, in SVG units.
const (
	chartWidth  = 960
	chartLeft   = 50
	chartRight  = 200 // room for the legends
	chartTop    = 30
	panelHeight = 110
	panelGap    = 26
	requestRow  = 14
	eventRow    = 14
)

// palette colours the series of a panel in turn.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// Panel is one chart of a picture: its series share a y axis.
type Panel struct {
	Title  string
	Series []Series
}

// SVG draws the timeline as panels stacked over one time axis (twin
// seconds, real-world seconds beneath) from its first sample, each series a step line; the
// scenario's events as numbered vertical marks, listed below; and each
// request as a bar from its sending to its first token (green) or to its
// failure (red).
func (tl *Timeline) SVG(title string, panels []Panel) []byte {
	samples, requests, events := tl.Samples(), tl.Requests(), tl.Events()
	begin, end := 0.0, 1.0
	if n := len(samples); n > 0 {
		begin, end = samples[0].At.Seconds(), max(end, samples[n-1].At.Seconds())
	}
	for _, r := range requests {
		begin, end = min(begin, r.Sent.Seconds()), max(end, r.Ended.Seconds())
	}
	end = max(end, begin+1)
	plotW := float64(chartWidth - chartLeft - chartRight)
	x := func(sec float64) float64 { return chartLeft + plotW*(sec-begin)/(end-begin) }
	panelsBottom := chartTop + len(panels)*(panelHeight+panelGap)
	reqTop := panelsBottom + 30
	evTop := reqTop + requestRow*len(requests) + 20
	height := evTop + eventRow*len(events) + 10

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="18" font-size="14">%s</text>`+"\n", chartLeft, html.EscapeString(title))
	for i, p := range panels {
		top := chartTop + i*(panelHeight+panelGap)
		tl.drawPanel(&b, p, samples, top, x, end)
	}
	// The time axis under the last panel.
	tick := niceStep((end - begin) / 8)
	for t := math.Ceil(begin/tick) * tick; t <= end+1e-9; t += tick {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%gs</text><text x="%.1f" y="%d" text-anchor="middle" fill="#777">%.0fs real</text>`+"\n",
			x(t), panelsBottom-panelGap+14, t, x(t), panelsBottom-panelGap+26, tl.c.Real(secondsDur(t)).Seconds())
	}
	// Events: numbered marks through every panel, listed below.
	for i, e := range events {
		ex := x(e.At.Seconds())
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999" stroke-dasharray="3,3"/><text x="%.1f" y="%d" text-anchor="middle" fill="#555">%d</text>`+"\n",
			ex, chartTop-2, ex, panelsBottom-panelGap, ex, chartTop-4, i+1)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#333">%d. %s: %s</text>`+"\n", chartLeft, evTop+eventRow*i, i+1, tl.both(e.At), html.EscapeString(e.What))
	}
	// Requests.
	if len(requests) > 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d">requests: sent → first token (green) or failure (red)</text>`+"\n", chartLeft, reqTop-6)
	}
	for i, r := range requests {
		ry := reqTop + requestRow*i
		to, colour := r.FirstToken, "#2ca02c"
		if r.FirstToken == 0 {
			to, colour = r.Ended, "#d62728"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/><text x="%.1f" y="%d">%s: %d after %d attempt(s)</text>`+"\n",
			x(r.Sent.Seconds()), ry, math.Max(2, x(to.Seconds())-x(r.Sent.Seconds())), requestRow-4, colour,
			x(end)+6, ry+9, html.EscapeString(r.Model), r.Status, r.Attempts)
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// drawPanel draws one panel with its top edge at top.
func (tl *Timeline) drawPanel(b *strings.Builder, p Panel, samples []Sample, top int, x func(float64) float64, end float64) {
	hi := 1.0
	for _, s := range p.Series {
		for _, smp := range samples {
			hi = max(hi, s.Value(smp))
		}
	}
	hi = math.Ceil(hi)
	y := func(v float64) float64 { return float64(top) + panelHeight*(1-v/hi) }
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", chartLeft+4, top+10, html.EscapeString(p.Title))
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/><line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="black"/>`+"\n",
		chartLeft, y(0), x(end), y(0), chartLeft, top, chartLeft, y(0))
	step := math.Max(1, math.Ceil(hi/4))
	for v := 0.0; v <= hi; v += step {
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%g</text><line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n",
			chartLeft-4, y(v)+4, v, chartLeft, y(v), x(end), y(v))
	}
	for i, s := range p.Series {
		colour := palette[i%len(palette)]
		var pts []string
		for j, smp := range samples {
			v := s.Value(smp)
			if j > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(smp.At.Seconds()), y(s.Value(samples[j-1]))))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(smp.At.Seconds()), y(v)))
		}
		// Lines drawn later are thinner, so one that overlaps an earlier
		// one still shows both.
		width := 3.0 - 0.6*float64(i)
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="%.1f" points="%s"/>`+"\n", colour, math.Max(1, width), strings.Join(pts, " "))
		ly := top + 14*i + 4
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"/><text x="%.1f" y="%d">%s</text>`+"\n",
			x(end)+6, ly, x(end)+21, ly, colour, x(end)+26, ly+4, html.EscapeString(s.Name))
	}
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
