package k8sschema

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// nodePool is a valid Karpenter NodePool with extra lines under spec.
func nodePool(specLines string) string {
	return "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n" + specLines +
		"  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}\n      requirements: []\n"
}

// TestValidatorIsStrict: the real schemas refuse an unknown field, a wrong
// type, a missing required field, a value outside an enum, a string off
// its pattern and a number beyond its bounds, and accept a well-formed
// object (quantities as numbers, int-or-string ports).
func TestValidatorIsStrict(t *testing.T) {
	v, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	good := `
apiVersion: apps/v1
kind: Deployment
metadata: {name: a}
spec:
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec:
      containers:
        - name: c
          image: x
          resources: {limits: {nvidia.com/gpu: 1, memory: 2Gi}}
          readinessProbe: {httpGet: {path: /h, port: http}}
`
	if errs := v.Validate(decode(t, good)); len(errs) > 0 {
		t.Fatalf("a good Deployment refused: %v", errs)
	}
	if errs := v.Validate(decode(t, nodePool("  weight: 10\n  disruption: {consolidateAfter: 10m}\n"))); len(errs) > 0 {
		t.Fatalf("a good NodePool refused: %v", errs)
	}
	for name, tt := range map[string]struct{ doc, want string }{
		"unknown field":            {strings.Replace(good, "image: x", "image: x\n          imagePullPolice: Always", 1), "imagePullPolice: unknown field"},
		"wrong type":               {strings.Replace(good, "name: c", "name: 5", 1), "containers[0].name: want a string"},
		"missing":                  {strings.Replace(good, "  selector: {matchLabels: {app: a}}\n", "", 1), "spec.selector: required"},
		"enum":                     {"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}\n      requirements: []\n  disruption: {consolidationPolicy: Sometimes}\n", "consolidationPolicy"},
		"pattern":                  {nodePool("  disruption: {consolidateAfter: 10 min}\n"), `spec.disruption.consolidateAfter: "10 min" does not match`},
		"maximum":                  {nodePool("  weight: 101\n"), "spec.weight: 101 is above the maximum 100"},
		"quantity pattern":         {nodePool("  limits: {nvidia.com/gpu: sixteen}\n"), `spec.limits.nvidia.com/gpu: "sixteen" does not match`},
		"no schema":                {"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n", "no schema"},
		"custom resource metadata": {"apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: s, labelz: {a: b}}\nspec: {scaleTargetRef: {name: d}, triggers: []}\n", "metadata.labelz: unknown field"},
	} {
		errs := v.Validate(decode(t, tt.doc))
		if !strings.Contains(strings.Join(errs, "\n"), tt.want) {
			t.Errorf("%s: errors %v, want one with %q", name, errs, tt.want)
		}
	}
}
