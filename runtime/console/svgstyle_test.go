package console

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/ledger"
)

// TestPresentationAttributes: a style attribute becomes the presentation
// attributes it declares, a property SVG has no attribute for is dropped,
// and a drawn chart keeps no inline style at all.
func TestPresentationAttributes(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"a path", `<path d="M 0 0" style="stroke-width:0;stroke:rgba(255,255,255,1.0);fill:rgba(255,255,255,1.0)"/>`,
			`<path d="M 0 0" stroke-width="0" stroke="rgba(255,255,255,1.0)" fill="rgba(255,255,255,1.0)"/>`},
		{"text with a quoted font", `<text x="1" style="fill:none;font-size:12.8px;font-family:'Roboto Medium',sans-serif">a</text>`,
			`<text x="1" fill="none" font-size="12.8px" font-family="&#39;Roboto Medium&#39;,sans-serif">a</text>`},
		{"no attribute for it", `<path style="position:absolute;fill:red"/>`, `<path fill="red"/>`},
		{"no style", `<svg viewBox="0 0 1 1"></svg>`, `<svg viewBox="0 0 1 1"></svg>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(presentationAttributes([]byte(tc.in))); got != tc.want {
				t.Errorf("got %s\nwant %s", got, tc.want)
			}
		})
	}
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	svg, err := usageSVG(usageData{From: from, To: from.Add(3 * day), Totals: []ledger.ModelUsage{{Model: "llama-8b"}},
		Days: []dayUsage{{Day: from, ModelUsage: ledger.ModelUsage{Model: "llama-8b", PromptTokens: 10}}}}, "tokens")
	if err != nil {
		t.Fatal(err)
	}
	got := string(presentationAttributes(svg))
	if strings.Contains(got, "style=") || !regexp.MustCompile(`stroke="rgba\(31,111,180,1.0\)"`).MatchString(got) {
		t.Errorf("a drawn chart keeps inline style or lost its series colour:\n%.600s", got)
	}
}
