package render

import (
	"encoding/json"
	"testing"
)

// kedaFallback is what the test reads of a ScaledObject's fallback and
// triggers.
type kedaFallback struct {
	Spec struct {
		MinReplicaCount *int `json:"minReplicaCount"`
		Fallback        *struct {
			FailureThreshold int    `json:"failureThreshold"`
			Replicas         int    `json:"replicas"`
			Behavior         string `json:"behavior"`
		} `json:"fallback"`
		Triggers []struct {
			Type       string `json:"type"`
			MetricType string `json:"metricType"`
		} `json:"triggers"`
	} `json:"spec"`
}

// TestScaledObjectsFallBackWhenPrometheusFails: every rendered ScaledObject
// (the platform's and each model rendered alone) has a fallback, so that a
// Prometheus outage neither scales a busy model down nor a running one to
// zero (issue 43): at least one replica, the replicas running if more
// (currentReplicasIfHigher), after a few failed polls; and KEDA's admission
// rule holds (CheckFallbackValid in KEDA 2.17: a trigger other than cpu or
// memory with the AverageValue metric type, which an empty metricType is).
func TestScaledObjectsFallBackWhenPrometheusFails(t *testing.T) {
	seen := 0
	for set, objs := range renderedForLint(t) {
		for _, o := range objs {
			if o.Kind != "ScaledObject" {
				continue
			}
			seen++
			var so kedaFallback
			if err := json.Unmarshal(o.JSON, &so); err != nil {
				t.Fatal(err)
			}
			fb := so.Spec.Fallback
			if fb == nil {
				t.Errorf("%s: ScaledObject %s has no fallback: with Prometheus down KEDA scales on errors", set, o.Name)
				continue
			}
			minimum := 0
			if so.Spec.MinReplicaCount != nil {
				minimum = *so.Spec.MinReplicaCount
			}
			if fb.Replicas < max(minimum, 1) || fb.FailureThreshold < 1 || fb.Behavior != "currentReplicasIfHigher" {
				t.Errorf("%s: ScaledObject %s fallback %+v, want at least max(min %d, 1) replicas, a failure threshold, behavior currentReplicasIfHigher", set, o.Name, *fb, minimum)
			}
			averageValue := false
			for _, tr := range so.Spec.Triggers {
				if tr.Type != "cpu" && tr.Type != "memory" && (tr.MetricType == "" || tr.MetricType == "AverageValue") {
					averageValue = true
				}
			}
			if !averageValue {
				t.Errorf("%s: ScaledObject %s: KEDA refuses a fallback without an AverageValue trigger", set, o.Name)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no ScaledObject rendered")
	}
}
