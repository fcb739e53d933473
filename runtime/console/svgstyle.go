package console

import (
	"html"
	"regexp"
	"strings"
)

// styleAttr matches an inline style attribute as go-chart writes it.
var styleAttr = regexp.MustCompile(`\sstyle="([^"]*)"`)

// presentationProps are the CSS properties go-chart's SVG writer sets that
// SVG also takes as presentation attributes.
var presentationProps = map[string]bool{
	"fill": true, "fill-opacity": true, "stroke": true, "stroke-width": true, "stroke-opacity": true,
	"stroke-dasharray": true, "stroke-linecap": true, "stroke-linejoin": true, "opacity": true,
	"font-size": true, "font-family": true, "font-weight": true, "font-style": true, "text-anchor": true,
	"dominant-baseline": true,
}

// presentationAttributes rewrites every style="a:b;c:d" of svg into the
// presentation attributes a="b" c="d". The console's CSP allows no inline
// style, and a chart opened on its own (not as an <img> of a page) is a
// document that CSP governs: its style attributes were dropped and every
// shape filled black. Presentation attributes are not inline style, so
// the chart draws as designed under the same strict policy. A property
// SVG has no attribute for is left out.
func presentationAttributes(svg []byte) []byte {
	return styleAttr.ReplaceAllFunc(svg, func(m []byte) []byte {
		decl := html.UnescapeString(string(styleAttr.FindSubmatch(m)[1]))
		var b strings.Builder
		for _, d := range strings.Split(decl, ";") {
			prop, val, ok := strings.Cut(d, ":")
			prop, val = strings.TrimSpace(strings.ToLower(prop)), strings.TrimSpace(val)
			if !ok || val == "" || !presentationProps[prop] {
				continue
			}
			b.WriteString(" " + prop + `="` + html.EscapeString(val) + `"`)
		}
		return []byte(b.String())
	})
}
