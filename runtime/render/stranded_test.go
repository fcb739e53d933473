package render

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// strandedTrigger is the ScaledObject's trigger on the stranded-replica
// gauge, or nil.
func strandedTrigger(t *testing.T, so map[string]any) map[string]any {
	t.Helper()
	var found map[string]any
	for _, tr := range dig(t, so, "spec", "triggers").([]any) {
		md, _ := dig(t, tr, "metadata").(map[string]any)
		if q, _ := md["query"].(string); strings.Contains(q, strandedGauge) {
			if found != nil {
				t.Errorf("%v: two stranded triggers", dig(t, so, "metadata", "name"))
			}
			found = tr.(map[string]any)
		}
	}
	return found
}

// TestSingleReplicaModelsSurgeWhenStranded (the gauge's name is checked
// against its exporter by TestQueriedMetricsExist): a model that may run a single
// replica (its PodDisruptionBudget minAvailable 1) asks for a replica
// elsewhere when its last ones are on a Node being disrupted: its
// ScaledObject has a trigger on the orchestrators' stranded gauge, an
// AverageValue of 1 (the query is the replica count), activated by any
// stranded replica; the count is one more than the stranded ones when the
// scaled Deployment holds them all, and the stranded ones when an
// on-demand floor Deployment holds them (a spot model with a floor of 1).
// A model with a floor of 2 or more keeps a replica through a drain
// without a surge, and has none. The replacement's cold start and the old
// pod's grace fit in the GPU node's terminationGracePeriod, so it is ready
// before Karpenter would delete the pod the budget holds. Before, nothing
// started that replica: in the twin an AMI bump held the 32B's pod until
// the terminationGracePeriod, then deleted it, and the 32B had no Ready
// replica for a cold start (issue 41, scenario 5).
func TestSingleReplicaModelsSurgeWhenStranded(t *testing.T) {
	onDemandFloor := example(t)
	onDemandFloor.Plan.Workloads[workloadOf(onDemandFloor, "llama-8b")].MinReplicas = 1
	for _, tc := range []struct {
		name string
		p    Platform
		// want is each model's stranded query; "" for none.
		want map[string]string
	}{
		{"the example", example(t), map[string]string{
			"llama-8b":  "",
			"qwen-32b":  `max(llmplat_model_stranded_replicas{model="qwen-32b"}) + clamp_max(max(llmplat_model_stranded_replicas{model="qwen-32b"}), 1)`,
			"llama-70b": `max(llmplat_model_stranded_replicas{model="llama-70b"}) + clamp_max(max(llmplat_model_stranded_replicas{model="llama-70b"}), 1)`,
		}},
		{"a spot model with an on-demand floor of 1", onDemandFloor, map[string]string{
			"llama-8b": `max(llmplat_model_stranded_replicas{model="llama-8b"})`,
		}},
	} {
		files, err := Render(tc.p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for model, want := range tc.want {
			single := dig(t, modelDoc(t, files, model, "PodDisruptionBudget"), "spec")
			_, minAvailable := single.(map[string]any)["minAvailable"]
			tr := strandedTrigger(t, modelDoc(t, files, model, "ScaledObject"))
			if want == "" {
				if tr != nil || minAvailable {
					t.Errorf("%s: %s: stranded trigger %v with minAvailable %v, want neither", tc.name, model, tr, minAvailable)
				}
				continue
			}
			if tr == nil || !minAvailable {
				t.Errorf("%s: %s: stranded trigger %v with minAvailable %v, want both", tc.name, model, tr, minAvailable)
				continue
			}
			md := tr["metadata"].(map[string]any)
			if md["query"] != want || md["threshold"] != "1" || md["activationThreshold"] != "0" || tr["metricType"] != nil {
				t.Errorf("%s: %s: stranded trigger %v, want the query %s as an AverageValue of 1, activated above 0", tc.name, model, tr, want)
			}
		}
	}
}

// TestSurgeFits: a model that may run a single replica renders only when
// its replacement's cold start and its own grace fit in a GPU node's
// terminationGracePeriod; a floor of 2 needs no surge.
func TestSurgeFits(t *testing.T) {
	for _, tc := range []struct {
		min, load int
		ok        bool
	}{
		{1, 1116, true},
		{0, 1116, true},
		{1, int(nodeTerminationGrace.Seconds()) - 300 - modelGraceMargin - 1, true},
		{1, int(nodeTerminationGrace.Seconds()) - 300 - modelGraceMargin, false},
		{0, 4000, false},
		{2, 4000, true},
	} {
		err := surgeFits(ModelDeployment{MinReplicas: tc.min, DrainSeconds: 300}, tc.load)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "min_replicas")) {
			t.Errorf("min %d, load %d s: %v, want ok %v (naming min_replicas)", tc.min, tc.load, err, tc.ok)
		}
	}
	_, err := RenderModel(ModelDeployment{Name: "m", MinReplicas: 1, MaxReplicas: 2, DrainSeconds: int((50 * time.Minute).Seconds()),
		Revision: "r", EngineImage: testEngineImage, PlatformImage: "llmplat:1", Bucket: "b", Region: "eu-central-1",
		PrometheusURL: "http://prom:9090", NodePool: "gpu-l40s", Namespace: "llmplat", Workload: example(t).Plan.Workloads[1]})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "min_replicas") {
		t.Errorf("a single replica with a 50 min drain: %v, want ErrInvalid naming min_replicas", err)
	}
}

// TestOnDemandEnginesPack: every engine Deployment that does not prefer
// spot nodes prefers nodes that already run engines (hostname), so the
// replicas a drift moves fill the replacement node rather than leave the
// floors spread over one more node that WhenEmpty never consolidates; a
// spot model's scaled Deployment keeps its preference for spot alone. In
// the twin's AMI drift the scheduler put the 8B's second floor replica on
// the empty node Karpenter had launched beside the 32B's surge, and the
// floors ended on two GPU nodes instead of one (issue 41, scenario 5).
func TestOnDemandEnginesPack(t *testing.T) {
	files, err := Render(example(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"llama-8b", "qwen-32b", "llama-70b"} {
		for _, d := range modelDocs(t, files, model, "Deployment") {
			name := dig(t, d, "metadata", "name")
			affinity := dig(t, d, "spec", "template", "spec", "affinity").(map[string]any)
			_, spot := affinity["nodeAffinity"].(map[string]any)["preferredDuringSchedulingIgnoredDuringExecution"]
			pack, packs := affinity["podAffinity"]
			switch {
			case spot && packs:
				t.Errorf("%s prefers spot and packing: %v", name, pack)
			case spot:
			case !packs:
				t.Errorf("%s: on-demand engines without a packing preference", name)
			default:
				term := dig(t, pack, "preferredDuringSchedulingIgnoredDuringExecution", 0, "podAffinityTerm")
				if dig(t, term, "topologyKey") != "kubernetes.io/hostname" ||
					dig(t, term, "labelSelector", "matchLabels", "app.kubernetes.io/name") != "vllm" {
					t.Errorf("%s: packing term %v, want engines (app.kubernetes.io/name: vllm) by hostname", name, term)
				}
			}
		}
	}
}

// TestDemandLooksAColdStartAhead: each model's ScaledObject sizes it for
// the streams it will run when a replica asked for now is Ready — the
// streams running and waiting now plus their growth over the last five
// minutes, carried over the model's expected load and a poll — at the
// capacity plan's batch per replica (an AverageValue), activated by any
// demand; a spot model's on-demand floor serves its planned share, which
// is taken off. Before, the triggers fired only once the engines queued
// or their KV cache passed 80 %, and a replica came a cold start late: in
// the twin's reference ramp the 32B's callers waited out the queue limit
// for as long as its second replica loaded (issue 41, scenario 1).
func TestDemandLooksAColdStartAhead(t *testing.T) {
	files, err := Render(example(t))
	if err != nil {
		t.Fatal(err)
	}
	now := func(served string) string {
		sel := `{model_name="` + served + `"}`
		return "(sum(vllm:num_requests_running" + sel + ") + sum(vllm:num_requests_waiting" + sel + "))"
	}
	for _, tc := range []struct {
		model, served string
		planned       string
		want          string
	}{
		{"llama-8b", "meta-llama/Llama-3.1-8B-Instruct", "32",
			"clamp_min(" + now("meta-llama/Llama-3.1-8B-Instruct") + " + clamp_min(deriv(" + now("meta-llama/Llama-3.1-8B-Instruct") + "[300s:15s]), 0) * 640 - 64, 0)"},
		{"qwen-32b", "Qwen/Qwen2.5-32B-Instruct", "16",
			now("Qwen/Qwen2.5-32B-Instruct") + " + clamp_min(deriv(" + now("Qwen/Qwen2.5-32B-Instruct") + "[300s:15s]), 0) * 1086"},
		{"llama-70b", "meta-llama/Llama-3.1-70B-Instruct-FP8", "8",
			now("meta-llama/Llama-3.1-70B-Instruct-FP8") + " + clamp_min(deriv(" + now("meta-llama/Llama-3.1-70B-Instruct-FP8") + "[300s:15s]), 0) * 1131"},
	} {
		so := modelDoc(t, files, tc.model, "ScaledObject")
		var found []any
		for _, tr := range dig(t, so, "spec", "triggers").([]any) {
			if q, _ := dig(t, tr, "metadata").(map[string]any)["query"].(string); strings.Contains(q, "deriv(") {
				found = append(found, tr)
			}
		}
		if len(found) != 1 {
			t.Errorf("%s: %d demand triggers, want 1", tc.model, len(found))
			continue
		}
		tr := found[0].(map[string]any)
		md := tr["metadata"].(map[string]any)
		if md["query"] != tc.want || md["threshold"] != tc.planned || md["activationThreshold"] != "0" || tr["metricType"] != nil {
			t.Errorf("%s: demand trigger %v,\nwant the query %s as an AverageValue of %s, activated above 0", tc.model, tr, tc.want, tc.planned)
		}
	}
}
