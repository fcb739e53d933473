package render

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// renderedForLint is everything the lint reads: what `llmplat render`
// (and llmplat_platform_manifests) writes for examples/platform.yaml,
// and each model rendered alone as llmplat_model renders it.
func renderedForLint(t *testing.T) map[string][]lintObject {
	t.Helper()
	p := example(t)
	files, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string][]File{"platform": files}
	for i, m := range p.Models {
		mm, err := RenderModel(deploymentOf(p, i))
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		sets["llmplat_model "+m.Name] = []File{{Name: "model-" + m.Name + ".yaml", Data: mm.Data}}
	}
	out := map[string][]lintObject{}
	for name, fs := range sets {
		objs, err := lintObjects(fs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = objs
	}
	return out
}

// TestLintRenderedWorkloads: every rendered workload passes the lint —
// requests on every container, images from publishing registries, a
// model's probes, budgets that keep a single replica — but for the
// waivers, each with its reason and each still needed.
func TestLintRenderedWorkloads(t *testing.T) {
	var all []finding
	for name, objs := range renderedForLint(t) {
		ws, err := workloads(objs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The lint must keep seeing model engines and their budgets, or
		// it checks nothing.
		if !slices.ContainsFunc(ws, workload.isModel) || !slices.ContainsFunc(objs, func(o lintObject) bool { return o.Kind == "PodDisruptionBudget" }) {
			t.Errorf("%s: no model Deployment or no PodDisruptionBudget to lint", name)
		}
		fs, err := lint(objs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		all = append(all, fs...)
	}
	rest, unused := waive(all, lintWaivers)
	for _, f := range rest {
		t.Errorf("%v", f)
	}
	for _, w := range unused {
		t.Errorf("waiver %+v matches nothing: remove it", w)
	}
	for _, w := range lintWaivers {
		if strings.TrimSpace(w.Reason) == "" {
			t.Errorf("waiver %+v has no reason", w)
		}
	}
}

// TestLintBites: each rule finds the defect it guards when one rendered
// object is broken, and does not find it in the object as rendered.
func TestLintBites(t *testing.T) {
	tests := []struct {
		name, kind, object string
		edit               func(d map[string]any)
		want               finding // Msg: a part of the message
	}{
		{"init container without memory", "Deployment", "vllm-qwen-32b",
			func(d map[string]any) {
				delete(container(d, "initContainers", "modelsync")["resources"].(map[string]any)["requests"].(map[string]any), "memory")
			},
			finding{ruleRequests, "Deployment/vllm-qwen-32b", "modelsync", "no memory request"}},
		{"gateway without cpu", "Deployment", "llmplat-gateway",
			func(d map[string]any) {
				delete(container(d, "containers", "gateway")["resources"].(map[string]any)["requests"].(map[string]any), "cpu")
			},
			finding{ruleRequests, "Deployment/llmplat-gateway", "gateway", "no cpu request"}},
		{"device plugin without requests", "DaemonSet", "nvidia-device-plugin",
			func(d map[string]any) { delete(container(d, "containers", "nvidia-device-plugin"), "resources") },
			finding{ruleRequests, "DaemonSet/nvidia-device-plugin", "nvidia-device-plugin", "no memory request"}},
		{"device plugin from Docker Hub", "DaemonSet", "nvidia-device-plugin",
			func(d map[string]any) {
				container(d, "containers", "nvidia-device-plugin")["image"] = "nvidia/k8s-device-plugin:v0.17.0"
			},
			finding{ruleImage, "DaemonSet/nvidia-device-plugin", "nvidia-device-plugin", "left Docker Hub"}},
		{"init container from an unknown registry", "Deployment", "vllm-llama-70b",
			func(d map[string]any) { container(d, "initContainers", "modelcache")["image"] = "busybox:1.36" },
			finding{ruleImage, "Deployment/vllm-llama-70b", "modelcache", "Docker Hub"}},
		{"engine without liveness", "Deployment", "vllm-qwen-32b",
			func(d map[string]any) { delete(container(d, "containers", "vllm"), "livenessProbe") },
			finding{ruleProbes, "Deployment/vllm-qwen-32b", "vllm", "no liveness probe"}},
		{"floor without startup probe", "Deployment", "vllm-llama-8b-on-demand",
			func(d map[string]any) { delete(container(d, "containers", "vllm"), "startupProbe") },
			finding{ruleProbes, "Deployment/vllm-llama-8b-on-demand", "vllm", "no startup probe"}},
		{"single-replica model with maxUnavailable 1", "PodDisruptionBudget", "vllm-qwen-32b",
			func(d map[string]any) {
				s := d["spec"].(map[string]any)
				delete(s, "minAvailable")
				s["maxUnavailable"] = 1
			},
			finding{rulePDB, "PodDisruptionBudget/vllm-qwen-32b", "", "with 1 replica(s) it lets eviction take the last ready one"}},
		{"model at zero with maxUnavailable 1", "PodDisruptionBudget", "vllm-llama-70b",
			func(d map[string]any) {
				s := d["spec"].(map[string]any)
				delete(s, "minAvailable")
				s["maxUnavailable"] = 1
			},
			finding{rulePDB, "PodDisruptionBudget/vllm-llama-70b", "", "the last ready one"}},
		{"spot model's budget over the scaled part only", "PodDisruptionBudget", "vllm-llama-8b",
			func(d map[string]any) {
				d["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{"llmplat.io/replicas": "scaled", "llmplat.io/model": "llama-8b"}}
			},
			finding{rulePDB, "Deployment/vllm-llama-8b-on-demand", "", "no PodDisruptionBudget"}},
		{"crash-looping pod blocks a drain", "PodDisruptionBudget", "vllm-llama-8b",
			func(d map[string]any) { delete(d["spec"].(map[string]any), "unhealthyPodEvictionPolicy") },
			finding{rulePDB, "PodDisruptionBudget/vllm-llama-8b", "", "AlwaysAllow"}},
		{"gateway without its memory limit in the environment", "Deployment", "llmplat-gateway",
			func(d map[string]any) { delete(container(d, "containers", "gateway"), "env") },
			finding{ruleMemory, "Deployment/llmplat-gateway", "gateway", "no LLMPLAT_MEMORY_LIMIT"}},
		{"modelsync without a memory limit", "Deployment", "vllm-qwen-32b",
			func(d map[string]any) {
				delete(container(d, "initContainers", "modelsync")["resources"].(map[string]any)["limits"].(map[string]any), "memory")
			},
			finding{ruleMemory, "Deployment/vllm-qwen-32b", "modelsync", "no memory limit"}},
		{"gateway of one replica", "Deployment", "llmplat-gateway",
			func(d map[string]any) { d["spec"].(map[string]any)["replicas"] = 1 },
			finding{rulePDB, "PodDisruptionBudget/llmplat-gateway", "", "the last ready one"}},
	}
	objs := renderedForLint(t)["platform"]
	baseline, err := lint(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			broken := slices.Clone(objs)
			i := slices.IndexFunc(broken, func(o lintObject) bool { return o.Kind == tt.kind && o.Name == tt.object })
			if i < 0 {
				t.Fatalf("no %s/%s rendered", tt.kind, tt.object)
			}
			var d map[string]any
			if err := json.Unmarshal(broken[i].JSON, &d); err != nil {
				t.Fatal(err)
			}
			tt.edit(d)
			if broken[i].JSON, err = json.Marshal(d); err != nil {
				t.Fatal(err)
			}
			got, err := lint(broken)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(got, tt.want.matches) {
				t.Errorf("findings %v, want %v", got, tt.want)
			}
			if slices.ContainsFunc(baseline, tt.want.matches) {
				t.Errorf("the unbroken render already has %v", tt.want)
			}
		})
	}
}

// matches reports whether g is f, f.Msg being a part of g's message.
func (f finding) matches(g finding) bool {
	return g.Rule == f.Rule && g.Object == f.Object && g.Container == f.Container && strings.Contains(g.Msg, f.Msg)
}

// container returns the named container of a decoded workload's pod
// template, under key (containers or initContainers).
func container(d map[string]any, key, name string) map[string]any {
	spec := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	for _, c := range spec[key].([]any) {
		if c := c.(map[string]any); c["name"] == name {
			return c
		}
	}
	panic("no container " + name)
}
