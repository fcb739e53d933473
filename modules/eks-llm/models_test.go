package eksllm_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/render"
)

// TestExampleModelsAreOneDeclaration: the models examples/eks serves are
// the ones examples/platform.yaml declares (revision, GPUs per replica,
// replica bounds, spot), and each serves under its planner profile's
// served name, so the weights `llmplat plan -f examples/platform.yaml
// --format upload` prints (the profile's checkpoint) are what both
// examples load and what the planner sized.
func TestExampleModelsAreOneDeclaration(t *testing.T) {
	example := load(t, filepath.Join("..", "..", "examples", "eks"))
	p, err := render.ParseFile(filepath.Join("..", "..", "examples", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	models := literal(t, example.locals()["models"]).AsValueMap()
	if len(models) != len(p.Models) {
		t.Fatalf("examples/eks serves %d models, examples/platform.yaml declares %d", len(models), len(p.Models))
	}
	num := func(v cty.Value) int { n, _ := v.AsBigFloat().Int64(); return int(n) }
	for _, pm := range p.Models {
		t.Run(pm.Name, func(t *testing.T) {
			v, ok := models[pm.Name]
			if !ok {
				t.Fatalf("examples/eks does not serve %s", pm.Name)
			}
			m := v.AsValueMap()
			prof, ok := capacity.LookupModel(pm.Name)
			if !ok {
				t.Fatalf("%s is not a built-in profile", pm.Name)
			}
			w := p.Plan.Workloads[slices.IndexFunc(p.Plan.Workloads, func(w capacity.WorkloadSpec) bool { return w.Model == pm.Name })]
			spot := m["spot"] != cty.NilVal && m["spot"].True()
			for _, c := range []struct {
				field     string
				got, want any
			}{
				{"served_name", m["served_name"].AsString(), prof.ServedName},
				{"revision", m["revision"].AsString(), pm.Revision},
				{"gpus_per_replica", num(m["gpus_per_replica"]), w.TensorParallelSize},
				{"min_replicas", num(m["min_replicas"]), w.MinReplicas},
				{"max_replicas", num(m["max_replicas"]), w.MaxReplicas},
				{"spot", spot, pm.Spot},
			} {
				if c.got != c.want {
					t.Errorf("%s: examples/eks %v, want %v (examples/platform.yaml and the profile)", c.field, c.got, c.want)
				}
			}
		})
	}
}
