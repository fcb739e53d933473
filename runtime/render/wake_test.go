package render

import (
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/clusterwatch"
	"github.com/llmplat/llmplat/runtime/coldstart"
)

// TestWakeFromZero: each model's Service announces its cold start from
// zero from the planner's weights, and the autoscaler takes no replica
// away before it could have loaded and served: the HPA's scale-down
// window is at least a cold start, and a replica that turns Ready as late
// as its startup probe allows (after its node's launch, the image pull
// and the weights' sync) is still inside the refused callers' hold plus
// KEDA's cooldown.
func TestWakeFromZero(t *testing.T) {
	files, plan := renderedExample(t)
	for _, mp := range plan.Models {
		t.Run(mp.Model, func(t *testing.T) {
			svc := modelDoc(t, files, mp.Model, "Service")
			spec, _ := dig(t, svc, "metadata", "annotations").(map[string]any)[clusterwatch.ModelSpecAnnotation].(string)
			_, load, err := clusterwatch.ParseModelSpec(spec)
			if err != nil {
				t.Fatal(err)
			}
			weights := mp.Memory.WeightBytes
			if want := time.Duration(expectedLoadSeconds(weights)) * time.Second; load != want {
				t.Errorf("Service announces a load of %v, want %v from the planner's %.0f GB of weights", load, want, weights/1e9)
			}
			so := modelDoc(t, files, mp.Model, "ScaledObject")
			window := time.Duration(dig(t, so, "spec", "advanced", "horizontalPodAutoscalerConfig", "behavior",
				"scaleDown", "stabilizationWindowSeconds").(int)) * time.Second
			if window < load {
				t.Errorf("scale-down window %v is shorter than a cold start (%v): a new replica may go before it served", window, load)
			}
			cooldown := time.Duration(dig(t, so, "spec", "cooldownPeriod").(int)) * time.Second
			probe := dig(t, modelDoc(t, files, mp.Model, "Deployment"), "spec", "template", "spec", "containers", 0, "startupProbe")
			budget := time.Duration(dig(t, probe, "failureThreshold").(int)*dig(t, probe, "periodSeconds").(int)) * time.Second
			latestReady := time.Duration(nodeLaunchSeconds+imagePullSeconds)*time.Second +
				time.Duration(weights/weightsSyncRate*float64(time.Second)) + budget
			if held := min(load+coldstart.HoldMargin, coldstart.MaxHold) + cooldown; held < latestReady {
				t.Errorf("a replica Ready as late as its startup probe allows (%v from zero) outlives the hold and cooldown (%v)", latestReady, held)
			}
		})
	}
}

// TestRolloutOutlastsAColdStart: a model Deployment's rollout is reported
// failed only after two cold starts without progress; Kubernetes' default
// (600 s) is shorter than the larger models' loads, so every rollout of
// them would report ProgressDeadlineExceeded while merely loading.
func TestRolloutOutlastsAColdStart(t *testing.T) {
	files, plan := renderedExample(t)
	for _, mp := range plan.Models {
		load := expectedLoadSeconds(mp.Memory.WeightBytes)
		for _, doc := range modelDocs(t, files, mp.Model, "Deployment") {
			deadline, ok := dig(t, doc, "spec", "progressDeadlineSeconds").(int)
			if !ok || deadline < 2*load {
				t.Errorf("%s: progressDeadlineSeconds %v, want at least two cold starts (2 × %d s)", mp.Model, dig(t, doc, "spec", "progressDeadlineSeconds"), load)
			}
		}
	}
}

// TestActivationPastThreshold: a ScaledObject that may sit at zero (a
// spot model's replicas above its on-demand floor, a model scaled to
// zero) is activated by its engines' load only past the load's own
// threshold: at KEDA's default activation (any value above 0) the 8B
// kept a spot replica above its floor whenever it served anything. The
// platform's queue still wakes a model at zero at its first caller, a
// stranded replica asks for its surge at once, and the demand forecast
// activates past the on-demand floor's planned share.
func TestActivationPastThreshold(t *testing.T) {
	files, plan := renderedExample(t)
	for _, mp := range plan.Models {
		so := modelDoc(t, files, mp.Model, "ScaledObject")
		for _, tr := range dig(t, so, "spec", "triggers").([]any) {
			if dig(t, tr, "type") != "prometheus" {
				continue
			}
			md := dig(t, tr, "metadata").(map[string]any)
			query, _ := md["query"].(string)
			activation, ok := md["activationThreshold"].(string)
			switch {
			case strings.Contains(query, "llmplat_model_pending_requests"):
				if activation != "0" {
					t.Errorf("%s: the queue's trigger activates above %q, want any queued caller (0)", mp.Model, activation)
				}
			case strings.Contains(query, "deriv("):
				// The demand forecast: past the floor's planned share (taken
				// off in the query, TestDemandLooksAColdStartAhead); a model
				// scaled to zero stays up while it serves a stream.
				if activation != "0" {
					t.Errorf("%s: the demand trigger activates above %q, want any demand past the floor's share (0)", mp.Model, activation)
				}
			case strings.Contains(query, strandedGauge):
				if activation != "0" {
					t.Errorf("%s: the stranded trigger activates above %q, want any stranded replica (0)", mp.Model, activation)
				}
			case !ok || activation != md["threshold"]:
				t.Errorf("%s: trigger %s activates above %q, want its threshold %v", mp.Model, query, activation, md["threshold"])
			}
		}
	}
}
