package twin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// nodesScale is the acceptance test's time scale: a minute of the real
// world lasts a second.
const nodesScale = 60

// nodesWait bounds each step of the acceptance test on a busy machine.
const nodesWait = 3 * time.Minute

// g6e is the instance table's g6e shapes.
func g6e() []capacity.Instance {
	var out []capacity.Instance
	for _, in := range capacity.Instances() {
		if in.Family == "g6e" {
			out = append(out, in)
		}
	}
	return out
}

// pickObjects are the objects of kind and name among objs, in the order
// asked.
func pickObjects(t *testing.T, objs []*unstructured.Unstructured, want ...[2]string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, w := range want {
		n := len(out)
		for _, o := range objs {
			if o.GetKind() == w[0] && o.GetName() == w[1] {
				out = append(out, o)
			}
		}
		if len(out) != n+1 {
			t.Fatalf("want one %s %s among the applied objects, found %d", w[0], w[1], len(out)-n)
		}
	}
	return out
}

func fromUnstructured(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatal(err)
	}
}

// TestGPUNodeColdStartAndConsolidation: the rendered on-demand NodePool
// on a KWOKNodeClass and the rendered 8B floor Deployment (one replica)
// → Karpenter launches a KWOK node of the g6e shape the planner buys; the
// pod runs at an address of the pod range, a real sim answers there, and
// the pod turns Ready only after the model's load; scaled to zero, the
// pod's in-flight stream finishes before its process ends; the empty node
// is consolidated away.
// gpuTwin is a twin with KWOK, Karpenter and the engine backer, and the
// rendered objects one 8B replica on an on-demand g6e node needs.
type gpuTwin struct {
	c    *Cluster
	eng  *Engines
	objs []*unstructured.Unstructured
	dep  appsv1.Deployment
	svc  corev1.Service
	// consolidateAfter is the NodePool's, as substituted.
	consolidateAfter time.Duration
}

// startGPUTwin starts the twin and picks, substituted, the namespace, the
// engines' ServiceAccount, the node class, the on-demand NodePool, the
// 8B's Service and its on-demand floor Deployment, set to one replica.
func startGPUTwin(t *testing.T) *gpuTwin {
	t.Helper()
	c := StartControlPlane(t, Options{Scale: nodesScale})
	if c == nil {
		return nil
	}
	c.StartKWOK(t)
	c.StartKarpenter(t, g6e())
	g := &gpuTwin{c: c, eng: c.StartEngines(t, EngineOptions{})}
	applied, err := Substitute(Env{Scaler: c}, renderExample(t))
	if err != nil {
		t.Fatal(err)
	}
	g.objs = pickObjects(t, applied, [2]string{"Namespace", "llmplat"}, [2]string{"ServiceAccount", "vllm"},
		[2]string{"KWOKNodeClass", "gpu"}, [2]string{"NodePool", "gpu-l40s"},
		[2]string{"Service", "vllm-llama-8b"}, [2]string{"Deployment", "vllm-llama-8b-on-demand"})
	// One replica of the floor's two: these tests watch one node.
	if err := unstructured.SetNestedField(g.objs[5].Object, int64(1), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	fromUnstructured(t, g.objs[5], &g.dep)
	fromUnstructured(t, g.objs[4], &g.svc)
	after, _, _ := unstructured.NestedString(g.objs[3].Object, "spec", "disruption", "consolidateAfter")
	if g.consolidateAfter, err = time.ParseDuration(after); err != nil {
		t.Fatal(err)
	}
	return g
}

// enginePod waits for the one engine pod that runs with an address.
func (g *gpuTwin) enginePod(t *testing.T, seen *podEvents) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	testenv.EventuallyNil(t, nodesWait, "the engine pod runs with an address", func() error {
		pods, err := g.c.Client.CoreV1().Pods(g.dep.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "llmplat.io/replicas=on-demand-floor"})
		if err != nil {
			return err
		}
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
				live = append(live, p)
			}
		}
		if len(live) != 1 {
			return fmt.Errorf("%d pods running with an address, want 1", len(live))
		}
		pod = live[0]
		return nil
	})
	return pod
}

// waitReady waits until pod is seen Ready and returns when it was.
func waitReady(t *testing.T, seen *podEvents, pod string) time.Time {
	t.Helper()
	testenv.EventuallyNil(t, nodesWait, "the engine pod is Ready", func() error {
		if seen.first(pod, seenReady).IsZero() {
			return errors.New("not Ready")
		}
		return nil
	})
	return seen.first(pod, seenReady)
}

func TestGPUNodeColdStartAndConsolidation(t *testing.T) {
	g := startGPUTwin(t)
	if g == nil {
		return
	}
	c, eng, dep, svc, consolidateAfter := g.c, g.eng, g.dep, g.svc, g.consolidateAfter
	ctx := t.Context()
	ns := dep.Namespace
	seen := watchPods(t, c, ns)
	applied0 := time.Now()
	c.Apply(t, g.objs)

	// A g6e node launches and the pod runs on it at a pod-range address.
	pod := g.enginePod(t, seen)
	node, err := c.Client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := capacity.SmallestInstance(capacity.L40S.Name, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Labels[corev1.LabelInstanceTypeStable]; got != want.Type {
		t.Errorf("node instance type %s, want %s (the planner's)", got, want.Type)
	}
	if gpus := node.Status.Allocatable[GPUResource]; gpus.Value() != 1 {
		t.Errorf("node allocatable %s = %s, want 1", GPUResource, gpus.String())
	}
	if ip, err := netip.ParseAddr(pod.Status.PodIP); err != nil || !PodRange.Contains(ip) {
		t.Errorf("pod IP %s is outside %s", pod.Status.PodIP, PodRange)
	}
	addr := net.JoinHostPort(pod.Status.PodIP, "8000")

	// Ready only once the sim has loaded.
	ready := waitReady(t, seen, pod.Name)
	running := seen.first(pod.Name, func(p *corev1.Pod) bool { return p != nil && p.Status.PodIP != "" })
	timing := timingOf(t, eng, pod.Name)
	load := expectedLoad(t, &svc) // on the twin's clock, as substituted
	if got := ready.Sub(running); got < load {
		t.Errorf("pod Ready %s after it ran, before the model's expected load %s", got, load)
	}
	if err := httpGetOK(ctx, "http://"+addr+"/health"); err != nil {
		t.Errorf("the Ready engine's /health: %v", err)
	}
	t.Logf("cold start: pod %s at %s on %s node %s", pod.Name, pod.Status.PodIP, node.Labels[corev1.LabelInstanceTypeStable], node.Name)
	t.Logf("cold start: pod running %s after apply, its engine's process started %s after apply, pod Ready %s after apply "+
		"(%s real-world at scale %d; expected load %s in the twin)",
		running.Sub(applied0).Round(time.Millisecond), timing.Started.Sub(applied0).Round(time.Millisecond),
		ready.Sub(applied0).Round(time.Millisecond), c.Real(ready.Sub(applied0)).Round(time.Second), nodesScale, load)

	// A stream in flight when the pod is deleted finishes: the drain
	// waits for it, then the process ends and the pod goes.
	stream := startStream(t, addr, svc.Annotations)
	if err := scaleTo(ctx, c, ns, dep.Name, 0); err != nil {
		t.Fatal(err)
	}
	end := <-stream
	if end.err != nil {
		t.Errorf("the stream in flight at deletion: %v", end.err)
	}
	gone := func(p *corev1.Pod) bool { return p == nil }
	testenv.EventuallyNil(t, nodesWait, "the engine pod is gone", func() error {
		if seen.first(pod.Name, gone).IsZero() {
			return errors.New("pod still there")
		}
		return nil
	})
	empty := seen.first(pod.Name, gone)
	timing = timingOf(t, eng, pod.Name)
	// In order: deletion seen, the process's exit, the pod marked
	// stopped, the pod gone; the stream, in flight at the deletion, ended
	// whole (the drain waited for it: none cut, below).
	if !end.at.After(timing.Terminating) {
		t.Errorf("the stream ended at %s, before the deletion was seen at %s: it tested no drain",
			end.at.Format(time.StampMicro), timing.Terminating.Format(time.StampMicro))
	}
	t.Logf("drain: the stream ended %s after the deletion was seen, the engine exited %s after it",
		end.at.Sub(timing.Terminating).Round(time.Millisecond), timing.Exited.Sub(end.at).Round(time.Millisecond))
	steps := []struct {
		name string
		at   time.Time
	}{{"deletion seen", timing.Terminating}, {"process exited", timing.Exited},
		{"pod marked stopped", timing.Stopped}, {"pod gone", empty}}
	for i := 1; i < len(steps); i++ {
		if steps[i].at.Before(steps[i-1].at) {
			t.Errorf("%s at %s, before %s at %s", steps[i].name, steps[i].at.Format(time.StampMicro),
				steps[i-1].name, steps[i-1].at.Format(time.StampMicro))
		}
	}
	if got := eng.StreamsCut(); got != 0 {
		t.Errorf("streams cut: %d, want 0", got)
	}
	if sims := eng.Sims(""); len(sims) != 0 {
		t.Errorf("live sims after deletion: %v", sims)
	}
	if err := httpGetOK(ctx, "http://"+addr+"/health"); err == nil {
		t.Error("the deleted pod's engine still answers")
	}

	// The empty node is consolidated away.
	testenv.EventuallyNil(t, nodesWait, "the empty node is removed", func() error {
		_, err := c.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("node %s still there (%v)", node.Name, err)
	})
	removed := time.Since(empty)
	t.Logf("consolidation: node removed %s after it emptied (consolidateAfter %s in the twin; Karpenter's unscaled poll and validation add up to 25 s)",
		removed.Round(time.Millisecond), consolidateAfter)
	if removed < consolidateAfter {
		t.Errorf("node removed %s after emptying, before consolidateAfter %s", removed, consolidateAfter)
	}
}

// podEvents records, as a watch delivers them, the states of a
// namespace's pods (nil: deleted), with when each was seen.
type podEvents struct {
	mu     sync.Mutex
	events []podEvent
}

type podEvent struct {
	name string
	pod  *corev1.Pod
	at   time.Time
}

// watchPods starts recording ns's pods until the test ends.
func watchPods(t *testing.T, c *Cluster, ns string) *podEvents {
	t.Helper()
	w, err := c.Client.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pe := &podEvents{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			e := podEvent{name: p.Name, pod: p, at: time.Now()}
			if ev.Type == watch.Deleted {
				e.pod = nil
			}
			pe.mu.Lock()
			pe.events = append(pe.events, e)
			pe.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return pe
}

// first is when pod was first seen in a state that cond holds for.
func (pe *podEvents) first(pod string, cond func(*corev1.Pod) bool) time.Time {
	return pe.firstAfter(pod, time.Time{}, cond)
}

// firstAfter is when pod was first seen after t0 in a state that cond
// holds for.
func (pe *podEvents) firstAfter(pod string, t0 time.Time, cond func(*corev1.Pod) bool) time.Time {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	for _, e := range pe.events {
		if e.name == pod && e.at.After(t0) && cond(e.pod) {
			return e.at
		}
	}
	return time.Time{}
}

// seenReady reports whether a recorded pod state (nil: deleted) is Ready.
func seenReady(p *corev1.Pod) bool { return p != nil && podReady(p) }

func timingOf(t *testing.T, eng *Engines, pod string) EngineTiming {
	t.Helper()
	for _, tm := range eng.Timings() {
		if tm.Pod == pod {
			return tm
		}
	}
	t.Fatalf("no engine timing for pod %s", pod)
	return EngineTiming{}
}

func expectedLoad(t *testing.T, svc *corev1.Service) time.Duration {
	t.Helper()
	for part := range strings.SplitSeq(svc.Annotations["llmplat.io/model-spec"], ",") {
		if v, ok := strings.CutPrefix(part, "expected-load="); ok {
			d, err := time.ParseDuration(v + "s")
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatal("no expected-load")
	return 0
}

func scaleTo(ctx context.Context, c *Cluster, ns, name string, n int32) error {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	_, err := c.Client.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "scale")
	return err
}

// streamTokens is a long answer, most of the 8B's 8,192-token context:
// at the test's scale it runs for seconds, so it is still in flight when
// the deletion reaches the engine's backer.
const streamTokens = 8000

// streamEnd is how a stream ended (nil: with [DONE]) and when its last
// line was read.
type streamEnd struct {
	err error
	at  time.Time
}

// streamWait bounds a whole test stream: its tokens at the sim's time
// scale, on a busy machine.
const streamWait = 2 * time.Minute

// startStream starts a streaming chat completion on the engine and
// returns once its first chunk has arrived; the channel gets how it ended.
func startStream(t *testing.T, addr string, ann map[string]string) <-chan streamEnd {
	t.Helper()
	served := ""
	for part := range strings.SplitSeq(ann["llmplat.io/model-spec"], ",") {
		if v, ok := strings.CutPrefix(part, "served="); ok {
			served = v
		}
	}
	body := fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":%d,"ignore_eos":true,"messages":[{"role":"user","content":"hi"}]}`, served, streamTokens)
	ctx, cancel := context.WithTimeout(context.Background(), streamWait)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := engineHTTP.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("stream: %s: %s", resp.Status, b)
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan streamEnd, 1)
	go func() {
		defer cancel()
		defer resp.Body.Close()
		for {
			line, err := r.ReadString('\n')
			if strings.TrimSpace(line) == "data: [DONE]" {
				done <- streamEnd{at: time.Now()}
				return
			}
			if err != nil {
				done <- streamEnd{err: fmt.Errorf("stream ended without [DONE]: %w", err), at: time.Now()}
				return
			}
		}
	}()
	return done
}

// TestKilledEngineCutsItsStreamsAndTurnsUnready: a spot reclaim kills a
// node's engines at once: the stream in flight is cut and counted, the
// pod turns unready from its failing readiness probe, and once the pod is
// deleted (no drain: nothing runs) its replacement loads and serves.
func TestKilledEngineCutsItsStreamsAndTurnsUnready(t *testing.T) {
	g := startGPUTwin(t)
	if g == nil {
		return
	}
	c, eng, ns := g.c, g.eng, g.dep.Namespace
	seen := watchPods(t, c, ns)
	c.Apply(t, g.objs)
	pod := g.enginePod(t, seen)
	waitReady(t, seen, pod.Name)
	addr := net.JoinHostPort(pod.Status.PodIP, "8000")

	stream := startStream(t, addr, g.svc.Annotations)
	killed := time.Now()
	if n := eng.KillNode(pod.Spec.NodeName); n != 1 {
		t.Fatalf("killed %d engines on node %s, want 1", n, pod.Spec.NodeName)
	}
	if end := <-stream; end.err == nil {
		t.Error("the stream of a killed engine ended with [DONE]")
	}
	if got := eng.StreamsCut(); got != 1 {
		t.Errorf("streams cut: %d, want 1", got)
	}
	if sims := eng.Sims(""); len(sims) != 0 {
		t.Errorf("live sims after the kill: %v", sims)
	}
	unreadyPod := func(p *corev1.Pod) bool { return p != nil && !seenReady(p) }
	testenv.EventuallyNil(t, nodesWait, "the killed engine's pod unready", func() error {
		if seen.firstAfter(pod.Name, killed, unreadyPod).IsZero() {
			return errors.New("still Ready")
		}
		return nil
	})
	unready := seen.firstAfter(pod.Name, killed, unreadyPod)
	t.Logf("spot kill: pod unready %s after its engine was killed", unready.Sub(killed).Round(time.Millisecond))

	if err := c.Client.CoreV1().Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := g.enginePod(t, seen)
	if next.UID == pod.UID {
		t.Fatal("the deleted pod is still the running one")
	}
	waitReady(t, seen, next.Name)
	if err := httpGetOK(t.Context(), "http://"+net.JoinHostPort(next.Status.PodIP, "8000")+"/health"); err != nil {
		t.Errorf("the replacement's engine: %v", err)
	}
	if sims := eng.Sims(""); len(sims) != 1 || sims[0].Pod != next.Name || !sims[0].Ready {
		t.Errorf("live sims %v, want the replacement's, Ready", sims)
	}
}
