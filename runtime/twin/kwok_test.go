package twin

import (
	"bytes"
	"regexp"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// stageSelector is the label part of a KWOK stage's selector.
type stageSelector struct {
	MatchLabels      map[string]string `json:"matchLabels"`
	MatchExpressions []struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values"`
	} `json:"matchExpressions"`
}

// labelKey matches a selector expression on a label.
var labelKey = regexp.MustCompile(`^\.metadata\.labels\["([^"]+)"\]$`)

// appliesTo reports whether the selector's label conditions hold for a
// pod with labels: its other conditions (phase, deletion) are left aside.
func (s stageSelector) appliesTo(labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	for _, e := range s.MatchExpressions {
		m := labelKey.FindStringSubmatch(e.Key)
		if m == nil {
			continue
		}
		v, ok := labels[m[1]]
		in := ok && slices.Contains(e.Values, v)
		if (e.Operator == "In" && !in) || (e.Operator == "NotIn" && in) {
			return false
		}
	}
	return true
}

// TestKWOKLeavesEnginePodsToTheBacker: of the stages KWOK plays, engine
// pods get only the twin's own start (an address, running, not Ready) and
// deletion (once the backer marked them stopped) stages; other pods get
// the module's, which make them Ready and delete them at once.
func TestKWOKLeavesEnginePodsToTheBacker(t *testing.T) {
	config, err := kwokConfig(moduleDir(t, KWOKModule))
	if err != nil {
		t.Fatal(err)
	}
	type stage struct {
		Kind     string
		Metadata struct{ Name string }
		Spec     struct {
			ResourceRef struct{ Kind string } `json:"resourceRef"`
			Selector    stageSelector
			Next        struct {
				StatusTemplate string `json:"statusTemplate"`
			}
		}
	}
	applies := map[string][]string{} // pod kind → stage names
	templates := map[string]string{}
	for doc := range bytes.SplitSeq(config, []byte("\n---\n")) {
		var s stage
		if err := yaml.Unmarshal(doc, &s); err != nil {
			t.Fatal(err)
		}
		if s.Kind != "Stage" {
			t.Fatalf("a %q in KWOK's config, want stages only", s.Kind)
		}
		if s.Spec.ResourceRef.Kind != "Pod" {
			continue
		}
		templates[s.Metadata.Name] = s.Spec.Next.StatusTemplate
		for kind, labels := range map[string]map[string]string{
			"engine": {EngineLabel: EngineLabelValue, "llmplat.io/model": "llama-8b"},
			"other":  {"app": "x"},
		} {
			if s.Spec.Selector.appliesTo(labels) {
				applies[kind] = append(applies[kind], s.Metadata.Name)
			}
		}
	}
	want := map[string][]string{
		"engine": {"pod-complete", "engine-pod-start", "engine-pod-delete"},
		"other":  {"pod-ready", "pod-complete", "pod-delete"},
	}
	for kind, w := range want {
		if got := applies[kind]; !slices.Equal(got, w) {
			t.Errorf("stages for %s pods: %v, want %v", kind, got, w)
		}
	}
	ready := regexp.MustCompile(`status: "True"\s+type: (Ready|ContainersReady)`)
	if m := ready.FindString(templates["engine-pod-start"]); m != "" {
		t.Errorf("engine-pod-start sets %q: an engine's readiness is its backer's", m)
	}
	if m := ready.FindString(templates["pod-ready"]); m == "" {
		t.Error("the module's pod-ready no longer sets Ready: the engine stage was derived from it, check both")
	}
}
