package render

import (
	"errors"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/kubetest"
)

// crdKinds are the custom kinds the dry run must have seen accepted, so
// that an empty or shrunken render cannot pass it.
var crdKinds = []string{"NodePool", "EC2NodeClass", "ScaledObject", "ServiceMonitor", "PodMonitor", "PrometheusRule"}

// dryRunModel is a model deployment rendered on its own, as llmplat_model
// renders it, with the options the example leaves out: scale to zero, a
// warm window, the spot pool, and a namespace no object declares.
func dryRunModel(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	m, err := RenderModel(ModelDeployment{Name: "qwen-32b", Revision: "2024-09-19", Namespace: "models",
		EngineImage: testEngineImage, PlatformImage: "llmplat/llmplat:0.1.0",
		Bucket: "llmplat-models", Region: "eu-central-1", PrometheusURL: "http://prometheus-operated.monitoring.svc:9090",
		NodePool: "gpu-l40s", Spot: true, Warm: &Warm{Timezone: "Europe/Berlin", Start: "0 8 * * 1-5", End: "0 19 * * 1-5"},
		MinReplicas: 0, MaxReplicas: 4,
		Workload: capacity.WorkloadSpec{Model: "qwen-32b", GPU: "L40S", TensorParallelSize: 2, PlannedStreamsPerReplica: 16,
			MinReplicas: 0, MaxReplicas: 4}})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kubetest.Objects(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// renderedObjects is every object examples/platform.yaml renders.
func renderedObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := Render(example(t))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		o, err := kubetest.Objects(f.Data)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		objs = append(objs, o...)
	}
	return objs
}

// firstOf returns a copy of the first object of kind in objs.
func firstOf(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind {
			return o.DeepCopy()
		}
	}
	t.Fatalf("no %s rendered", kind)
	return nil
}

// set sets a field of o, failing the test if the path does not fit.
func set(t *testing.T, o *unstructured.Unstructured, value any, path ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(o.Object, value, path...); err != nil {
		t.Fatalf("set %s: %v", strings.Join(path, "."), err)
	}
}

// invalidAt reports whether err is the server's 422 with a cause at field.
func invalidAt(err error, field string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Reason != metav1.StatusReasonInvalid || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if strings.HasPrefix(c.Field, field) {
			return true
		}
	}
	return false
}

// badRequestAt reports whether err is the server's 400 for a body it
// could not decode into its kind, naming field: a strict decoding error
// or a type mismatch in a built-in kind, which carry no structured cause.
func badRequestAt(err error, field string) bool {
	return apierrors.IsBadRequest(err) && strings.Contains(err.Error(), field)
}

// TestServerDryRun: a real API server, serving the Karpenter, KEDA and
// Prometheus Operator CRDs at the pinned versions, accepts every object
// examples/platform.yaml renders and a model deployment rendered on its
// own, created with dryRun=All under strict field validation (CEL rules
// included); and it refuses objects broken on purpose, so the check
// bites: an unknown field, a broken CEL rule, a value of the wrong type.
func TestServerDryRun(t *testing.T) {
	env := kubetest.StartPlatform(t)
	platform := renderedObjects(t)
	model := dryRunModel(t)

	t.Run("accepted", func(t *testing.T) {
		objs := append(slices.Clone(platform), model...)
		seen := map[string]bool{}
		for i, err := range env.DryRun(t, objs) {
			if err != nil {
				t.Errorf("refused: %v", err)
				continue
			}
			seen[objs[i].GetKind()] = true
		}
		for _, k := range crdKinds {
			if !seen[k] {
				t.Errorf("no %s accepted: the dry run did not cover the custom resources", k)
			}
		}
		if !seen["Deployment"] || !seen["Namespace"] {
			t.Errorf("kinds accepted %v, want the Namespace and the Deployments among them", seen)
		}
	})

	cases := []struct {
		name   string
		broken func(t *testing.T) *unstructured.Unstructured
		want   func(err error) bool
	}{
		{"unknown field in a Deployment", func(t *testing.T) *unstructured.Unstructured {
			d := firstOf(t, model, "Deployment")
			set(t, d, int64(2), "spec", "replica")
			return d
		}, func(err error) bool { return badRequestAt(err, `unknown field "spec.replica"`) }},
		{"unknown field in a NodePool", func(t *testing.T) *unstructured.Unstructured {
			np := firstOf(t, platform, "NodePool")
			set(t, np, "10m", "spec", "disruption", "consolidateAftr")
			return np
		}, func(err error) bool { return badRequestAt(err, `unknown field "spec.disruption.consolidateAftr"`) }},
		{"NodePool budget against its CEL rule", func(t *testing.T) *unstructured.Unstructured {
			// Karpenter's rule: a budget has both a schedule and a
			// duration, or neither.
			np := firstOf(t, platform, "NodePool")
			budgets := []any{map[string]any{"nodes": "1", "schedule": "0 9 * * mon-fri"}}
			set(t, np, budgets, "spec", "disruption", "budgets")
			return np
		}, func(err error) bool { return invalidAt(err, "spec.disruption.budgets") }},
		{"ScaledObject replica count of the wrong type", func(t *testing.T) *unstructured.Unstructured {
			so := firstOf(t, model, "ScaledObject")
			set(t, so, "four", "spec", "maxReplicaCount")
			return so
		}, func(err error) bool { return invalidAt(err, "spec.maxReplicaCount") }},
		{"Deployment replicas of the wrong type", func(t *testing.T) *unstructured.Unstructured {
			d := firstOf(t, platform, "Deployment")
			set(t, d, "two", "spec", "replicas")
			return d
		}, func(err error) bool { return badRequestAt(err, "spec.replicas") }},
	}
	for _, tc := range cases {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			got := env.DryRun(t, []*unstructured.Unstructured{tc.broken(t)})[0]
			if got == nil || !tc.want(got) {
				t.Errorf("dry run answered %v, want a refusal for this defect", got)
			}
		})
	}
}
