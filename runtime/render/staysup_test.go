package render

import (
	"fmt"
	"strings"
	"testing"
)

// alertRule is one alerting rule of the rendered PrometheusRule.
type alertRule struct{ name, expr, model string }

// renderedAlerts lists the example platform's alerting rules.
func renderedAlerts(t *testing.T, p Platform) []alertRule {
	t.Helper()
	files, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []alertRule
	for _, f := range files {
		for _, d := range docs(t, f) {
			if d["kind"] != "PrometheusRule" {
				continue
			}
			for _, g := range dig(t, d, "spec", "groups").([]any) {
				for _, r := range dig(t, g, "rules").([]any) {
					name, _ := dig(t, r, "alert").(string)
					expr, _ := dig(t, r, "expr").(string)
					model, _ := r.(map[string]any)["labels"].(map[string]any)["model"].(string)
					out = append(out, alertRule{name, expr, model})
				}
			}
		}
	}
	return out
}

// TestAlertsWatchWhatKeepsModelsServing: the PrometheusRule alerts on what
// keeps the platform serving and scaling (issue 43): every model with no
// replica available (a model at zero only while callers wait), every
// model with a floor below it, the gateway's error and time-to-first-token
// SLO burn, Karpenter's failing launches, KEDA's failing scalers (its
// fallback holds the replicas, so nothing else shows it), fewer than two
// Prometheus replicas, and a GPU's XID error.
func TestAlertsWatchWhatKeepsModelsServing(t *testing.T) {
	p := example(t)
	alerts := renderedAlerts(t, p)
	find := func(name, model string) (alertRule, bool) {
		for _, a := range alerts {
			if a.name == name && a.model == model {
				return a, true
			}
		}
		return alertRule{}, false
	}
	for _, m := range p.Models {
		floor := p.Plan.Workloads[workloadOf(p, m.Name)].MinReplicas
		deployments := fmt.Sprintf(`deployment=~"vllm-%s|vllm-%s-on-demand"`, m.Name, m.Name)
		un, ok := find("ModelUnavailable", m.Name)
		switch {
		case !ok:
			t.Errorf("%s: no ModelUnavailable alert", m.Name)
		case !strings.Contains(un.expr, "kube_deployment_status_replicas_available") || !strings.Contains(un.expr, deployments):
			t.Errorf("%s: ModelUnavailable %q does not count both of its Deployments' available replicas", m.Name, un.expr)
		case floor == 0 && !strings.Contains(un.expr, fmt.Sprintf(`llmplat_model_pending_requests{model="%s"}`, m.Name)):
			t.Errorf("%s at zero: ModelUnavailable %q fires without callers waiting", m.Name, un.expr)
		}
		below, ok := find("ModelBelowFloor", m.Name)
		switch {
		case floor > 0 && !ok:
			t.Errorf("%s: floor %d but no ModelBelowFloor alert", m.Name, floor)
		case floor > 0 && !strings.HasSuffix(strings.TrimSpace(below.expr), fmt.Sprintf("< %d", floor)):
			t.Errorf("%s: ModelBelowFloor %q does not compare with its floor %d", m.Name, below.expr, floor)
		case floor == 0 && ok:
			t.Errorf("%s: a ModelBelowFloor alert for a model allowed at zero", m.Name)
		}
	}
	for _, want := range []struct{ alert, metric string }{
		{"GatewayErrorBudgetBurn", `llmplat_gateway_rejections_total{code=~"5.."}`},
		{"GatewayErrorBudgetBurn", `llmplat_gateway_requests_total{outcome="broken"}`},
		{"TimeToFirstTokenBudgetBurn", `llmplat_gateway_time_to_first_token_seconds_bucket{le="3"}`},
		{"KarpenterLaunchFailing", `karpenter_cloudprovider_errors_total{method="Create"}`},
		{"KEDAScalerErrors", "keda_scaler_detail_errors_total"},
		{"PrometheusReplicaDown", "kube-prometheus-stack-prometheus"},
		{"GPUXIDError", "DCGM_FI_DEV_XID_ERRORS"},
	} {
		a, ok := find(want.alert, "")
		if !ok {
			t.Errorf("no %s alert", want.alert)
			continue
		}
		if !strings.Contains(a.expr, want.metric) {
			t.Errorf("%s: %q does not read %s", want.alert, a.expr, want.metric)
		}
	}
}
