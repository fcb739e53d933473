package twin

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// renderedEnginePods are the pods of every rendered model Deployment, as
// KWOK would run them (substituted, with an address).
func renderedEnginePods(t *testing.T) []*corev1.Pod {
	t.Helper()
	applied, err := Substitute(Env{Scaler: testScale(60)}, renderExample(t))
	if err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for _, o := range applied {
		if o.GetKind() != "Deployment" || o.GetLabels()[EngineLabel] != EngineLabelValue {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
		pod.Name, pod.Namespace, pod.Status.PodIP = d.Name+"-x", d.Namespace, "10.244.1.7"
		pods = append(pods, pod)
	}
	if len(pods) == 0 {
		t.Fatal("no engine Deployment rendered")
	}
	return pods
}

// TestSimArgsPlayTheRenderedEngine: every rendered engine container's
// flags become sim flags the sim takes: the model by name, the served
// name and the vLLM limits as rendered, the pod's address and port 8000,
// the twin's time scale.
func TestSimArgsPlayTheRenderedEngine(t *testing.T) {
	e := &Engines{c: &Cluster{Scale: 60}}
	bin := BuildLLMPlat(t)
	for _, pod := range renderedEnginePods(t) {
		t.Run(pod.Name, func(t *testing.T) {
			model, args, err := e.simArgs(pod)
			if err != nil {
				t.Fatal(err)
			}
			if want := pod.Labels["llmplat.io/model"]; model != want {
				t.Errorf("model %q, want %q", model, want)
			}
			ctr := container(pod)
			want := []string{"--host=10.244.1.7", "--port=8000", "--model=" + model, "--time-scale=60"}
			for _, a := range ctr.Args {
				if !strings.HasPrefix(a, "--model=") && !strings.HasPrefix(a, "--port=") {
					want = append(want, a)
				}
			}
			if g, w := slices.Sorted(slices.Values(args)), slices.Sorted(slices.Values(want)); !slices.Equal(g, w) {
				t.Errorf("sim flags %v, want %v", g, w)
			}
			// The sim parses them: started on loopback, it serves.
			local := append(slices.Clone(args), "--host=127.0.0.1", "--port=0", "--load-time=0s")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"sim"}, local...)...)
			var out testenv.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			testenv.EventuallyNil(t, time.Minute, "the sim serving", func() error {
				if !strings.Contains(out.String(), "serving") {
					return fmt.Errorf("output %q", out.String())
				}
				return nil
			})
		})
	}
}

// TestSimArgsRefuseWhatTheSimCannotPlay: a vLLM flag with no counterpart
// or another port is an error, not a silent difference.
func TestSimArgsRefuseWhatTheSimCannotPlay(t *testing.T) {
	e := &Engines{c: &Cluster{Scale: 60}}
	for _, extra := range []string{"--enable-prefix-caching=true", "--port=9000", "--quantization"} {
		t.Run(extra, func(t *testing.T) {
			pod := renderedEnginePods(t)[0]
			ctr := container(pod)
			ctr.Args = append(ctr.Args, extra)
			if _, args, err := e.simArgs(pod); err == nil {
				t.Errorf("engine flag %s taken: %v", extra, args)
			}
		})
	}
}

// TestPreStopDrainReadsTheRenderedHook: the rendered preStop drains for
// drain_seconds (300 s) after a 5 s settle, polling every 2 s; a hook of
// another shape is refused.
func TestPreStopDrainReadsTheRenderedHook(t *testing.T) {
	ctr := container(renderedEnginePods(t)[0])
	got, err := preStopDrain(ctr)
	if err != nil {
		t.Fatal(err)
	}
	if want := (drainScript{settle: 5 * time.Second, poll: 2 * time.Second, deadline: 300 * time.Second}); *got != want {
		t.Errorf("drain %+v, want %+v", *got, want)
	}
	ctr.Lifecycle.PreStop.Exec.Command = []string{"sleep", "30"}
	if d, err := preStopDrain(ctr); err == nil {
		t.Errorf("another preStop read as %+v", d)
	}
}

// TestSplitLoadKeepsTheStartupProbe: of a model's load, the engine's own
// part fits the rendered startup probe's budget with the margin the
// probe was sized with; the whole load passes either way.
func TestSplitLoadKeepsTheStartupProbe(t *testing.T) {
	for _, pod := range renderedEnginePods(t) {
		ctr := container(pod)
		budget := time.Duration(ctr.StartupProbe.FailureThreshold*ctr.StartupProbe.PeriodSeconds) * time.Second
		for _, total := range []time.Duration{0, 30 * time.Second, 624 * time.Second, time.Hour} {
			hold, load := splitLoad(ctr, total)
			if hold+load != total || hold < 0 || load < 0 {
				t.Errorf("%s: %s split into %s + %s", pod.Name, total, hold, load)
			}
			if load > budget/2 {
				t.Errorf("%s: the engine loads %s, over half the startup probe's %s", pod.Name, load, budget)
			}
		}
	}
}
