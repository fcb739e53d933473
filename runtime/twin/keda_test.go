package twin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// The ScaledObject of TestKEDAScalesZeroToNAndBack, at the time scale
// kedaTestScale: the rendered 15 s polling becomes 1 s, and the HPA's
// 15 s loop too; the cooldown is short, as the test only needs to see it
// pass.
const (
	kedaTestScale     = 15
	kedaTestPolling   = 15 * time.Second // real-world, as rendered
	kedaTestCooldown  = 5                // seconds, in the twin
	kedaTestThreshold = 2                // the metric per replica
	kedaTestMax       = 4
)

// scaleWait bounds each scaling step of the test: a scrape, a poll or an
// HPA sync, and the Deployment's update, on a busy machine.
const scaleWait = 2 * time.Minute

var scaledObjectGVR = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}

// TestKEDAScalesZeroToNAndBack drives a ScaledObject's prometheus trigger
// from a gauge the test serves in the namespace: above activation KEDA
// wakes the Deployment from zero; high, the HPA KEDA made scales it to N
// through the metrics adapter; at zero, KEDA takes it back to zero once
// the cooldown has passed.
func TestKEDAScalesZeroToNAndBack(t *testing.T) {
	c := StartControlPlane(t, Options{Scale: kedaTestScale})
	if c == nil {
		return
	}
	start := time.Now()
	p := c.StartPrometheus(t)
	promUp := time.Since(start)
	c.StartKEDA(t)
	kedaUp := time.Since(start) - promUp
	polling := c.Seconds(kedaTestPolling)

	var queue atomic.Int64
	exporter := serveInNamespace(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE twin_test_queue gauge\ntwin_test_queue %d\n", queue.Load())
	}))
	if err := p.SetTargets("exporter", []Target{{Addr: exporter}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ns, name = "scaling", "scaled"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app"}}}}},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	so := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"scaleTargetRef":  map[string]any{"name": name},
			"minReplicaCount": int64(0), "maxReplicaCount": int64(kedaTestMax),
			"pollingInterval": int64(polling.Seconds()), "cooldownPeriod": int64(kedaTestCooldown),
			"triggers": []any{map[string]any{"type": "prometheus", "metadata": map[string]any{
				"serverAddress":       p.URL,
				"query":               "max(twin_test_queue)",
				"threshold":           strconv.Itoa(kedaTestThreshold),
				"activationThreshold": "0",
			}}},
		},
	}}
	if _, err := dyn.Resource(scaledObjectGVR).Namespace(ns).Create(ctx, so, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas := func() (int32, error) {
		d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		return ptr.Deref(d.Spec.Replicas, 1), nil
	}
	waitReplicas := func(what string, want int32) time.Duration {
		t.Helper()
		start := time.Now()
		testenv.EventuallyNil(t, scaleWait, what, func() error {
			got, err := replicas()
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%d replicas, want %d", got, want)
			}
			return nil
		})
		return time.Since(start)
	}

	// Idle: KEDA has made its HPA and the Deployment stays at zero.
	testenv.EventuallyNil(t, scaleWait, "KEDA's HPA", func() error {
		_, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "keda-hpa-"+name, metav1.GetOptions{})
		return err
	})
	waitQuery(t, p, "max(twin_test_queue)", func(v float64, ok bool) error {
		if !ok || v != 0 {
			return fmt.Errorf("want the idle gauge scraped")
		}
		return nil
	})
	if got, err := replicas(); err != nil || got != 0 {
		t.Fatalf("idle: %d replicas (%v), want 0", got, err)
	}

	queue.Store(1) // above activation, one replica's worth
	wake := waitReplicas("KEDA to wake the Deployment (0→1)", 1)

	queue.Store(kedaTestThreshold*kedaTestMax + 1) // more than the maximum's worth
	up := waitReplicas("the HPA to scale to the maximum (1→N)", kedaTestMax)
	hpa, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "keda-hpa-"+name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hpa.Status.CurrentMetrics) == 0 || hpa.Status.CurrentMetrics[0].External == nil {
		t.Errorf("the HPA read no external metric through the adapter: %+v", hpa.Status.CurrentMetrics)
	}

	queue.Store(0)
	down := waitReplicas("KEDA to scale to zero after the cooldown (N→0)", 0)
	// KEDA counts the cooldown from the last poll that found the trigger
	// active, which it records (to the second, rounded down): the
	// Deployment may reach zero only a cooldown after that.
	zeroAt := time.Now()
	got, err := dyn.Resource(scaledObjectGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lastActiveText, _, _ := unstructured.NestedString(got.Object, "status", "lastActiveTime")
	lastActive, err := time.Parse(time.RFC3339, lastActiveText)
	if err != nil {
		t.Fatalf("the ScaledObject's lastActiveTime %q: %v", lastActiveText, err)
	}
	if early := lastActive.Add(kedaTestCooldown * time.Second).Sub(zeroAt); early > 0 {
		t.Errorf("at zero %v before the cooldown ended (last active %v)", early, lastActive)
	}
	t.Logf("Prometheus ready in %v, KEDA (CRDs, operator, adapter Available) in %v",
		promUp.Round(100*time.Millisecond), kedaUp.Round(100*time.Millisecond))
	t.Logf("scale %v, scrape every %v, polling %v, HPA loop %v, cooldown %d s: 0→1 in %v, 1→%d in %v, %d→0 in %v",
		c.Scale, p.ScrapeInterval, polling, c.Seconds(15*time.Second), kedaTestCooldown,
		wake.Round(100*time.Millisecond), kedaTestMax, up.Round(100*time.Millisecond), kedaTestMax, down.Round(100*time.Millisecond))
}

// BenchmarkKEDACerts measures making KEDA's certificates for a twin, the
// price of not waiting for KEDA's own rotation.
func BenchmarkKEDACerts(b *testing.B) {
	c := &Cluster{Dir: b.TempDir()}
	for b.Loop() {
		if _, err := c.writeKEDACerts(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestKEDAReconcilesRenderedScaledObjects applies each model's Deployments
// and ScaledObject as llmplat renders them for examples/platform.yaml,
// through the twin's Substitutions (its Prometheus, its clock), and checks
// that KEDA builds a scaler for every trigger, that the HPA of a model
// with a floor reads every one of them through the adapter, and that the
// engines' queries find the series a simulated engine of the model
// exports.
func TestKEDAReconcilesRenderedScaledObjects(t *testing.T) {
	c := StartControlPlane(t, Options{Scale: kedaTestScale})
	if c == nil {
		return
	}
	p := c.StartPrometheus(t)
	c.StartKEDA(t)
	var models []*unstructured.Unstructured
	for _, o := range renderExample(t) {
		if o.GetLabels()["llmplat.io/model"] != "" || o.GetKind() == "ScaledObject" {
			models = append(models, o)
		}
	}
	objs, err := Substitute(Env{Scaler: c, PrometheusURL: p.URL}, models)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := objs[0].GetNamespace()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Apply(t, objs)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	var scaled []*unstructured.Unstructured
	var engines []Target
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			engines = append(engines, Target{Addr: serveEngine(t, servedName(t, o)), Labels: map[string]string{"pod": o.GetName()}})
		case "ScaledObject":
			scaled = append(scaled, o)
		}
	}
	if err := p.SetTargets("vllm", engines); err != nil {
		t.Fatal(err)
	}
	if len(scaled) == 0 {
		t.Fatal("no ScaledObject rendered")
	}
	for _, so := range scaled {
		triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
		floor, _, _ := unstructured.NestedInt64(so.Object, "spec", "minReplicaCount")
		hpaName := "keda-hpa-" + so.GetName()
		testenv.EventuallyNil(t, scaleWait, so.GetName()+" Ready with an HPA of every trigger", func() error {
			got, err := dyn.Resource(scaledObjectGVR).Namespace(ns).Get(ctx, so.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ready := condition(got, "Ready"); ready != "True" {
				return fmt.Errorf("Ready %s", ready)
			}
			hpa, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, hpaName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(hpa.Spec.Metrics) != len(triggers) {
				return fmt.Errorf("the HPA has %d metrics for %d triggers", len(hpa.Spec.Metrics), len(triggers))
			}
			if floor == 0 {
				return nil // at zero the HPA reads nothing
			}
			read := 0
			for _, m := range hpa.Status.CurrentMetrics {
				if m.External != nil {
					read++
				}
			}
			if read != len(triggers) {
				return fmt.Errorf("the HPA read %d of its %d external metrics: %+v", read, len(triggers), hpa.Status.Conditions)
			}
			return nil
		})
		for _, tr := range triggers {
			m, _ := tr.(map[string]any)
			query, _, _ := unstructured.NestedString(m, "metadata", "query")
			if m["type"] != "prometheus" || !strings.Contains(query, "vllm:") {
				continue // the platform's pending gauge needs an orchestrator
			}
			waitQuery(t, p, query, func(v float64, ok bool) error {
				if !ok {
					return errors.New("no series: the query names no metric or label the engine exports")
				}
				return nil
			})
		}
	}
}

// servedName is the --served-model-name of a rendered engine Deployment.
func servedName(tb testing.TB, dep *unstructured.Unstructured) string {
	tb.Helper()
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	for _, ct := range containers {
		args, _, _ := unstructured.NestedStringSlice(ct.(map[string]any), "args")
		for _, a := range args {
			if name, ok := strings.CutPrefix(a, "--served-model-name="); ok {
				return name
			}
		}
	}
	tb.Fatalf("%s runs no engine with a served model name", dep.GetName())
	return ""
}

// serveEngine serves a simulated engine of the served model name in the
// namespace and returns its host:port.
func serveEngine(tb testing.TB, served string) string {
	tb.Helper()
	sim, err := enginesim.New(enginesim.Config{ServedModelName: served})
	if err != nil {
		tb.Fatal(err)
	}
	return serveInNamespace(tb, sim.Handler())
}

// condition is the status of an object's condition typ, or "" without it.
func condition(obj *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
