package twin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/llmplat/llmplat/runtime/render"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// Deployment condition reasons (the deployment controller's): a rollout
// complete, and one that went past its progressDeadlineSeconds.
const (
	reasonNewRSAvailable   = "NewReplicaSetAvailable"
	reasonDeadlineExceeded = "ProgressDeadlineExceeded"
)

// rolloutCallers is how many callers stream to the rolled-out model
// throughout the rollout.
const rolloutCallers = 4

// rolloutPrompt and rolloutAnswer size their requests: a short question
// and an answer cap above the sim's longest natural answer.
const (
	rolloutPrompt = "Summarise what a rolling update of a model server must never do."
	rolloutAnswer = 640
)

// scenarioRollout: a new revision of the 32B (floor 1, a cold start past
// Kubernetes' default 600 s progress deadline) rolled out the way a
// platform team does it: the revision changed in the platform
// description, rendered, and the manifests applied again. With callers
// streaming to it throughout, the Deployment surges a new replica on a
// new node, which loads; only then does the old one drain and go. No
// stream is cut, the Ready replicas never drop below the floor, and the
// rollout reports done the way kubectl rollout status reads it: never
// ProgressDeadlineExceeded (templates' progressDeadlineSeconds of two
// cold starts), ending with NewReplicaSetAvailable.
func (r *twinRun) scenarioRollout(t *testing.T) string {
	t.Helper()
	const (
		model    = "qwen-32b"
		dep      = "vllm-qwen-32b"
		ns       = "llmplat"
		revision = "2024-09-19-r2"
	)
	ctx := t.Context()
	cut0 := r.eng.StreamsCut()
	old := r.eng.Sims(model)
	if len(old) != floors[model] {
		t.Fatalf("the 32B runs %d engines before its rollout, want its floor %d", len(old), floors[model])
	}
	busy := watchBusy(t, old[0].Addr)
	shapes := r.tl.Last().Shapes
	callers := r.streamsTo(ctx, model, rolloutCallers, callerOptions{Prompt: rolloutPrompt, MaxTokens: rolloutAnswer})
	from := r.tl.Now()
	testenv.EventuallyNil(t, r.c.Dur(5*time.Minute)+waitSlack, "streams in flight on the 32B", func() error {
		for _, s := range old {
			if busy, err := BusyRequests(s.Addr); err == nil && busy > 0 {
				return nil
			}
		}
		return errors.New("none")
	})

	rendered := renderEdited(t, func(p *render.Platform) {
		for i := range p.Models {
			if p.Models[i].Name == model {
				p.Models[i].Revision = revision
			}
		}
	})
	applied, err := Substitute(Env{Scaler: r.c, PrometheusURL: r.prom.URL}, rendered)
	if err != nil {
		t.Fatal(err)
	}
	conds := r.watchProgressing(t, ns, dep)
	r.tl.Mark(fmt.Sprintf("rollout: the 32B's revision %s rendered and applied, %d callers streaming", revision, rolloutCallers))
	start := r.tl.Now()
	r.c.Apply(t, applied)
	var done appsv1.Deployment
	end := r.waitStep(t, "the rollout reports done", func() error {
		d, err := r.c.Client.AppsV1().Deployments(ns).Get(ctx, dep, metav1.GetOptions{})
		if err != nil {
			return err
		}
		done = *d
		return rolloutStatus(d)
	})
	oldGone := r.waitStep(t, "the old replica drained and gone", func() error {
		for _, s := range old {
			if tm := timingOf(t, r.eng, s.Pod); tm.Stopped.IsZero() {
				return fmt.Errorf("%s not stopped", s.Pod)
			}
		}
		return nil
	})
	calls := endAll(callers)
	r.tl.Mark("load stops")

	seen, minAvailable := conds.stop()
	oldTiming := timingOf(t, r.eng, old[0].Pod)
	atDeletion := busy.before(oldTiming.Terminating)
	var reasons []string
	for _, c := range seen {
		reasons = append(reasons, c.reason)
		if c.reason == reasonDeadlineExceeded {
			t.Errorf("the rollout reported %s at %s: %s", c.reason, r.tl.both(c.at-start), c.message)
		}
	}
	if p := progressing(&done); p == nil || p.Reason != reasonNewRSAvailable {
		t.Errorf("the rollout ended with Progressing %+v, want %s", p, reasonNewRSAvailable)
	}
	minReady := -1
	for _, s := range r.tl.Samples() {
		if s.At >= start && s.At <= oldGone && (minReady < 0 || s.Ready[model] < minReady) {
			minReady = s.Ready[model]
		}
	}
	if minReady < floors[model] || int(minAvailable) < floors[model] {
		t.Errorf("the 32B had %d Ready replicas in the samples and %d available in the Deployment's status during the rollout, below its floor of %d",
			minReady, minAvailable, floors[model])
	}
	served := summarize(calls, from, r.servedWithin())
	if served.Failed > 0 {
		t.Errorf("%d of %d requests to the 32B failed or waited past the queue limit, from %s to %s after the rollout's start; the first: %s",
			served.Failed, served.Total, r.tl.both(served.FirstFail-start), r.tl.both(served.LastFail-start), served.Example)
	}
	if atDeletion < 1 {
		t.Errorf("no stream in flight on the old replica when its pod began terminating (%d): the drain was not tested", atDeletion)
	}
	cut := r.eng.StreamsCut() - cut0
	if cut != 0 {
		t.Errorf("%d streams cut by the rollout", cut)
	}
	deadline := time.Duration(*done.Spec.ProgressDeadlineSeconds) * time.Second

	r.waitFor(t, 40*time.Minute, "every model back at its floor, no GPU node empty", floorsPacked)
	return fmt.Sprintf("### 7. A model rollout\n\n"+
		"The 32B's revision changed in the platform description, rendered and applied, with %d callers streaming to it. "+
		"The rollout reported done after %s (progress deadline %s, expected load %s); its Progressing reasons in turn: %s. "+
		"The old replica's pod began terminating after %s, %d streams in flight on its engine, and was gone after %s. "+
		"Ready replicas of the 32B never fewer than %d in the samples, available never fewer than %d in the Deployment's status (floor %d).\n\n"+
		"%d requests (no retries), %d of them not served within %s; %d streams cut.\n\n"+
		"GPU nodes before: %s; after: %s.\n",
		rolloutCallers, r.tl.both(end-start), r.tl.both(deadline), r.tl.both(r.c.Dur(renderedLoad(t, model))),
		strings.Join(reasons, " → "), r.tl.both(oldTiming.Terminating.Sub(r.tl.start)-start), atDeletion, r.tl.both(oldGone-start),
		minReady, minAvailable, floors[model], served.Total, served.Failed, r.tl.both(r.servedWithin()), cut,
		strings.Join(shapes, "; "), strings.Join(r.tl.Last().Shapes, "; ")) +
		r.drawn("rollout.svg", "A rollout of the 32B", start, []Panel{
			{"the 32B: pods, ready", []Series{PodsOf(model), ReadyOf(model)}},
			{"GPU nodes", []Series{NodesOf("gpu-l40s"), NodesOf("gpu-l40s-spot"), EmptyNodes()}},
			{"requests waiting (the pending gauge)", []Series{PendingOf(model)}},
		})
}

// rolloutStatus is nil when d's rollout is complete, as kubectl rollout
// status decides it; an error says what it waits for, or that the
// rollout went past its deadline.
func rolloutStatus(d *appsv1.Deployment) error {
	if d.Generation > d.Status.ObservedGeneration {
		return errors.New("the new generation not observed yet")
	}
	if p := progressing(d); p != nil && p.Reason == reasonDeadlineExceeded {
		return fmt.Errorf("deployment %s exceeded its progress deadline", d.Name)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	switch s := d.Status; {
	case s.UpdatedReplicas < want:
		return fmt.Errorf("%d of %d new replicas updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return fmt.Errorf("%d old replicas pending termination", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < s.UpdatedReplicas:
		return fmt.Errorf("%d of %d updated replicas available", s.AvailableReplicas, s.UpdatedReplicas)
	}
	return nil
}

// progressing is d's Progressing condition, or nil.
func progressing(d *appsv1.Deployment) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == appsv1.DeploymentProgressing {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// condSeen is a Progressing condition as the watch saw it change.
type condSeen struct {
	at              time.Duration
	reason, message string
	status          corev1.ConditionStatus
}

// condWatch records a Deployment's Progressing condition each time it
// changes.
type condWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	seen   []condSeen
	// minAvailable is the fewest available replicas in any status seen
	// (-1 before the first).
	minAvailable int32
}

// watchProgressing starts recording dep's Progressing condition; stop
// ends it and returns the changes seen.
func (r *twinRun) watchProgressing(t *testing.T, ns, dep string) *condWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cw := &condWatch{cancel: cancel, done: make(chan struct{}), minAvailable: -1}
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", dep).String()}
	w, err := r.c.Client.AppsV1().Deployments(ns).Watch(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(cw.done)
		defer w.Stop()
		var last condSeen
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					// The server ended the watch: start another.
					if w, err = r.c.Client.AppsV1().Deployments(ns).Watch(ctx, opts); err != nil {
						return
					}
					continue
				}
				d, ok := ev.Object.(*appsv1.Deployment)
				if !ok {
					continue
				}
				cw.mu.Lock()
				if cw.minAvailable < 0 || d.Status.AvailableReplicas < cw.minAvailable {
					cw.minAvailable = d.Status.AvailableReplicas
				}
				cw.mu.Unlock()
				p := progressing(d)
				if p == nil || (p.Reason == last.reason && p.Status == last.status) {
					continue
				}
				last = condSeen{at: r.tl.Now(), reason: p.Reason, message: p.Message, status: p.Status}
				cw.mu.Lock()
				cw.seen = append(cw.seen, last)
				cw.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cw.stop() })
	return cw
}

// stop ends the watch and returns the changes it saw and the fewest
// available replicas.
func (cw *condWatch) stop() ([]condSeen, int32) {
	cw.cancel()
	<-cw.done
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return append([]condSeen(nil), cw.seen...), cw.minAvailable
}

// busyLog samples an engine's running and waiting requests until it
// stops answering or is stopped.
type busyLog struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	at     []time.Time
	busy   []int
}

// busyPoll is how often a busyLog samples: as often as the waits poll.
const busyPoll = 20 * time.Millisecond

// watchBusy starts sampling the engine at addr.
func watchBusy(t *testing.T, addr string) *busyLog {
	ctx, cancel := context.WithCancel(context.Background())
	b := &busyLog{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for ctx.Err() == nil {
			n, err := BusyRequests(addr)
			if err != nil {
				return
			}
			b.mu.Lock()
			b.at, b.busy = append(b.at, time.Now()), append(b.busy, n)
			b.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(busyPoll):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-b.done })
	return b
}

// before is the last sample taken before t0 (-1: none).
func (b *busyLog) before(t0 time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := -1
	for i, at := range b.at {
		if at.Before(t0) {
			n = b.busy[i]
		}
	}
	return n
}
