package render

import (
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
