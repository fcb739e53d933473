package twin

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplat/llmplat/runtime/kubetest"
	"github.com/llmplat/llmplat/runtime/render"
)

// testScale is a time scale for tests of the substitutions alone.
type testScale float64

func (s testScale) Dur(d time.Duration) time.Duration { return time.Duration(float64(d) / float64(s)) }

// renderExample renders examples/platform.yaml as llmplat render does.
func renderExample(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return renderEdited(t, nil)
}

// renderEdited renders examples/platform.yaml as llmplat render does,
// after edit (if not nil) has changed the description, as a platform
// team edits its own.
func renderEdited(t *testing.T, edit func(*render.Platform)) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := render.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&p)
	}
	files, err := render.Render(p)
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

// TestSubstitutionsAreAllThatDiffers: every object the twin applies is
// the rendered one but for the fields its Substitutions name, and every
// rendered object is applied unless a substitution says it is not.
func TestSubstitutionsAreAllThatDiffers(t *testing.T) {
	rendered := renderExample(t)
	applied, err := Substitute(Env{Scaler: testScale(15), PrometheusURL: "http://10.244.255.254:9090"}, rendered)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*unstructured.Unstructured{}
	for _, o := range applied {
		byID[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	changed := 0
	for _, orig := range rendered {
		subs := substitutionsOf(orig)
		id := orig.GetKind() + "/" + orig.GetNamespace() + "/" + orig.GetName()
		got, ok := byID[id]
		allowed := map[string]bool{}
		for _, s := range subs {
			for _, p := range s.Paths {
				allowed[p] = true
			}
		}
		switch {
		case allowed["-"]:
			if ok {
				t.Errorf("%s is applied, though a substitution says it is not", id)
			}
			continue
		case allowed["kind"]:
			if ok {
				t.Errorf("%s is applied, though a substitution replaces it", id)
			}
			changed++
			continue
		case !ok:
			t.Errorf("%s is not applied, and no substitution says why", id)
			continue
		}
		for _, p := range diffPaths(orig.Object, got.Object, "") {
			changed++
			if !covered(p, allowed) {
				t.Errorf("%s differs at %s, which no substitution names", id, p)
			}
		}
	}
	if changed == 0 {
		t.Error("nothing substituted: the check saw no difference at all")
	}
	// The substitutions' own effect, on a few figures.
	for _, o := range applied {
		switch {
		case o.GetKind() == "ScaledObject" && o.GetName() == "vllm-llama-70b":
			if v, _, _ := unstructured.NestedInt64(o.Object, "spec", "cooldownPeriod"); v != 40 {
				t.Errorf("the 70B's cooldown %d s at scale 15, want 40", v)
			}
			triggers, _, _ := unstructured.NestedSlice(o.Object, "spec", "triggers")
			for _, tr := range triggers {
				if tr.(map[string]any)["type"] == "cron" {
					t.Error("the 70B's cron trigger is applied")
				}
				if a, _, _ := unstructured.NestedString(tr.(map[string]any), "metadata", "serverAddress"); a != "http://10.244.255.254:9090" {
					t.Errorf("the 70B's trigger reads %q, want the twin's Prometheus", a)
				}
			}
		case o.GetKind() == "ScaledObject" && o.GetName() == "vllm-llama-8b":
			// The demand forecast: a 300 s window sampled every 15 s, its
			// slope carried over the 8B's cold start and a poll (640 s).
			triggers, _, _ := unstructured.NestedSlice(o.Object, "spec", "triggers")
			forecasts := 0
			for _, tr := range triggers {
				q, _, _ := unstructured.NestedString(tr.(map[string]any), "metadata", "query")
				if strings.Contains(q, "deriv(") {
					forecasts++
					if !strings.Contains(q, "[20000ms:1000ms]") || !strings.Contains(q, ", 0) * 42.666") {
						t.Errorf("the 8B's demand forecast at scale 15: %s, want its window [20000ms:1000ms] and horizon 42.666… s", q)
					}
				}
			}
			if forecasts != 1 {
				t.Errorf("the 8B's ScaledObject has %d demand forecasts, want 1", forecasts)
			}
		case o.GetKind() == "NodePool":
			if v, _, _ := unstructured.NestedString(o.Object, "spec", "disruption", "consolidateAfter"); v != "40s" {
				t.Errorf("NodePool %s consolidateAfter %q at scale 15, want 40s", o.GetName(), v)
			}
		case o.GetKind() == "Service" && o.GetName() == "vllm-llama-70b":
			if !strings.Contains(o.GetAnnotations()["llmplat.io/model-spec"], "expected-load=74") {
				t.Errorf("the 70B's Service: %q, want expected-load=74 (1116 s at scale 15)", o.GetAnnotations()["llmplat.io/model-spec"])
			}
		}
	}
}

// substitutionsOf are the substitutions that apply to o.
func substitutionsOf(o *unstructured.Unstructured) []Substitution {
	var out []Substitution
	for _, s := range Substitutions {
		if s.Kind == o.GetKind() && (s.Names == nil || slices.Contains(s.Names, o.GetName())) {
			out = append(out, s)
		}
	}
	return out
}

// covered reports whether path p (list items as "*") matches one of the
// allowed paths, or lies under one.
func covered(p string, allowed map[string]bool) bool {
	parts := strings.Split(p, ".")
	for a := range allowed {
		ap := strings.Split(a, ".")
		if len(ap) > len(parts) {
			continue
		}
		match := true
		for i := range ap {
			if ap[i] != "*" && ap[i] != parts[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// diffPaths lists the paths where a and b differ; list items are "*".
func diffPaths(a, b any, at string) []string {
	join := func(k string) string {
		if at == "" {
			return k
		}
		return at + "." + k
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return []string{at}
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		var out []string
		for _, k := range sortedKeys(keys) {
			out = append(out, diffPaths(av[k], bv[k], join(k))...)
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return []string{at}
		}
		var out []string
		for i := range av {
			out = append(out, diffPaths(av[i], bv[i], join("*"))...)
		}
		return out
	default:
		if !reflect.DeepEqual(a, b) {
			return []string{at}
		}
		return nil
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
