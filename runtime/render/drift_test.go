package render

import (
	"strings"
	"testing"
)

// TestLedgerDriftComparesLikeWithLike: the critical LedgerDrift alert
// compares the billed completion tokens with every engine's own count, the
// on-premises nodes' (which Prometheus cannot scrape, exported by the
// orchestrators) as well as the cloud engines', each term surviving an
// empty sum; it divides by the billed tokens, which exist whenever anything
// was billed, and is silent below a volume where churn is noise. Before,
// it fired whenever on-premises nodes served (issue 30).
func TestLedgerDriftComparesLikeWithLike(t *testing.T) {
	files, err := Render(example(t))
	if err != nil {
		t.Fatal(err)
	}
	expr := ""
	for _, f := range files {
		for _, d := range docs(t, f) {
			if d["kind"] != "PrometheusRule" {
				continue
			}
			for _, g := range dig(t, d, "spec", "groups").([]any) {
				for _, r := range dig(t, g, "rules").([]any) {
					if dig(t, r, "alert") == "LedgerDrift" {
						expr, _ = dig(t, r, "expr").(string)
					}
				}
			}
		}
	}
	if expr == "" {
		t.Fatal("no LedgerDrift alert")
	}
	billed := `sum(increase(llmplat_gateway_settled_tokens_total{kind="completion"}[6h]))`
	for _, want := range []struct{ part, why string }{
		{"- (sum(increase(vllm:generation_tokens_total[6h])) or vector(0))", "the cloud engines' counters, zero when none runs"},
		{"- (sum(increase(llmplat_orchestrator_onprem_completion_tokens_total[6h])) or vector(0))", "the on-premises nodes' counts, zero when none serves"},
		{"/ " + billed + " >", "divided by the billed tokens"},
		{"and " + billed + " >", "a volume floor"},
	} {
		if !strings.Contains(strings.Join(strings.Fields(expr), " "), want.part) {
			t.Errorf("LedgerDrift lacks %s (%s):\n%s", want.part, want.why, expr)
		}
	}
}
