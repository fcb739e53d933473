package twin

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/llmplat/llmplat/runtime/clusterwatch"
)

// EnginePort is the port every engine listens on at its pod's address
// (the rendered container's --port).
const EnginePort = 8000

// engineContainer is the engine's container in a rendered engine pod.
const engineContainer = "vllm"

// EngineOptions configure the engine backer.
type EngineOptions struct {
	// Binary is the llmplat binary the engines run (BuildLLMPlat's); empty,
	// StartEngines builds one. A scenario builds it once and shares it with
	// StartPlatform.
	Binary string
	// NodeLaunch is the real-world part of a model's expected load that
	// the twin plays elsewhere (a KWOKNodeClass's nodeRegistrationDelay):
	// the engine loads for the rest. Zero: the engine loads for the whole
	// expected load, as the twin's nodes register at once.
	NodeLaunch time.Duration
	// LoadTime, when set, gives a model's real-world load time instead.
	LoadTime func(model string) (time.Duration, bool)
}

// Engines backs every engine pod that KWOK runs with a real `llmplat sim`
// process on the pod's address and EnginePort, keyed by the pod's UID
// (KWOK hands a gone pod's address to the next). It plays the engine's
// kubelet: the pod's readiness follows the engine's /health as its
// startup and readiness probes would; a terminating pod turns unready,
// runs its preStop drain, and its process gets SIGTERM, SIGKILL at the
// end of its grace; then the pod is marked stopped
// (EngineStoppedAnnotation) for KWOK to remove.
//
// Time: the pod's durations that Substitutions leave as rendered (probe
// periods, the preStop drain's seconds) are real-world, and the backer
// runs them Cluster.Scale times faster; those it scales (the deletion
// grace, the Service's expected-load) are read as they are. Probe
// timeouts are not scaled. Liveness is not played: an engine that dies
// stays dead, its pod unready.
type Engines struct {
	c    *Cluster
	opts EngineOptions
	bin  string
	ctx  context.Context

	pods  listerscorev1.PodLister
	nodes listerscorev1.NodeLister
	svcs  listerscorev1.ServiceLister
	wg    sync.WaitGroup

	mu      sync.Mutex
	byUID   map[types.UID]*engine
	byIP    map[string]*engine
	cut     int
	errs    []error
	timings []EngineTiming
}

// Sim is a live engine process.
type Sim struct {
	Pod, Node, Model string
	UID              types.UID
	// Addr is host:port of the engine.
	Addr string
	// Ready is the pod's readiness as the backer last set it.
	Ready bool
}

// EngineTiming is when an engine pod passed the steps of its life, as
// the backer saw them.
type EngineTiming struct {
	Pod string
	// Created is the pod's creation; Started the start of its process;
	// Ready when the backer first set it Ready.
	Created, Started, Ready time.Time
	// Terminating is when the backer saw its deletion; Exited when its
	// process ended; Stopped when the backer marked it stopped.
	Terminating, Exited, Stopped time.Time
}

// StartEngines starts the engine backer; it stops when the test ends,
// killing every engine it runs.
func (c *Cluster) StartEngines(tb testing.TB, opts EngineOptions) *Engines {
	tb.Helper()
	bin := opts.Binary
	if bin == "" {
		bin = BuildLLMPlat(tb)
	}
	e := &Engines{c: c, opts: opts, bin: bin,
		byUID: map[types.UID]*engine{}, byIP: map[string]*engine{}}
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	engines := informers.NewSharedInformerFactoryWithOptions(c.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = EngineLabel + "=" + EngineLabelValue }))
	all := informers.NewSharedInformerFactory(c.Client, 0)
	podInf := engines.Core().V1().Pods()
	e.pods, e.nodes, e.svcs = podInf.Lister(), all.Core().V1().Nodes().Lister(), all.Core().V1().Services().Lister()
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e.sync(obj) },
		UpdateFunc: func(_, obj any) { e.sync(obj) },
		DeleteFunc: func(obj any) { e.gone(obj) },
	}); err != nil {
		tb.Fatalf("twin: engine pods: %v", err)
	}
	engines.Start(ctx.Done())
	all.Start(ctx.Done())
	engines.WaitForCacheSync(ctx.Done())
	all.WaitForCacheSync(ctx.Done())
	tb.Cleanup(func() {
		cancel()
		engines.Shutdown()
		all.Shutdown()
		e.wg.Wait()
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, err := range e.errs {
			tb.Errorf("twin: engines: %v", err)
		}
	})
	return e
}

// Sims lists the live engines of model ("" for all).
func (e *Engines) Sims(model string) []Sim {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Sim
	for _, g := range e.byUID {
		if !g.started || g.exited() || (model != "" && g.model != model) {
			continue
		}
		out = append(out, Sim{Pod: g.name, Node: g.node, Model: g.model, UID: g.uid, Addr: g.addr(), Ready: g.ready})
	}
	slices.SortFunc(out, func(a, b Sim) int { return strings.Compare(a.Pod, b.Pod) })
	return out
}

// Kill ends pod's engine at once (SIGKILL), as a reclaimed spot instance
// ends it; what it was running counts as cut. The pod stays until
// something deletes it, unready once its readiness probe has failed.
func (e *Engines) Kill(pod string) error {
	if e.kill(func(g *engine) bool { return g.name == pod }) == 0 {
		return fmt.Errorf("no live engine for pod %s", pod)
	}
	return nil
}

// KillNode ends every engine on node at once, as the reclaim of its
// instance does, and returns how many it ended. InterruptSpot plays a
// whole spot interruption: the notice, then KillNode once it has run
// out.
func (e *Engines) KillNode(node string) int {
	return e.kill(func(g *engine) bool { return g.node == node })
}

// kill SIGKILLs the live engines that match.
func (e *Engines) kill(match func(*engine) bool) int {
	e.mu.Lock()
	var gs []*engine
	for _, g := range e.byUID {
		if g.started && !g.exited() && match(g) {
			gs = append(gs, g)
		}
	}
	e.mu.Unlock()
	for _, g := range gs {
		e.stopProcess(g, syscall.SIGKILL)
	}
	return len(gs)
}

// StreamsCut is how many requests engines were running or holding when
// their process was signalled (SIGTERM after a drain, SIGKILL), read from
// their /metrics just before: vLLM aborts them (the sim may let them
// finish; they count as cut all the same).
func (e *Engines) StreamsCut() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cut
}

// Timings lists the start and stop times of every engine pod seen.
func (e *Engines) Timings() []EngineTiming {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.timings)
}

// fail records an error, reported when the test ends.
func (e *Engines) fail(err error) {
	e.mu.Lock()
	e.errs = append(e.errs, err)
	e.mu.Unlock()
}

// sync reacts to an engine pod's new state: start its engine once KWOK
// runs it with an address, or begin its termination.
func (e *Engines) sync(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !e.onKWOKNode(pod) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.byUID[pod.UID]
	switch {
	case pod.DeletionTimestamp != nil && g == nil:
		// Never started: nothing to drain.
		g = &engine{uid: pod.UID, namespace: pod.Namespace, name: pod.Name, terminating: true, done: closed()}
		e.byUID[pod.UID] = g
		e.wg.Go(func() { e.markStopped(g) })
	case pod.DeletionTimestamp != nil && !g.terminating:
		g.terminating = true
		e.note(g, func(t *EngineTiming) { t.Terminating = time.Now() })
		close(g.terminate)
	case g == nil && pod.Status.PodIP != "" && pod.Status.Phase == corev1.PodRunning:
		g = &engine{uid: pod.UID, namespace: pod.Namespace, name: pod.Name, node: pod.Spec.NodeName, ip: pod.Status.PodIP,
			model: pod.Labels[clusterwatch.ModelLabel], terminate: make(chan struct{}), done: make(chan struct{})}
		prev := e.byIP[g.ip]
		e.byUID[pod.UID], e.byIP[g.ip] = g, g
		e.timings = append(e.timings, EngineTiming{Pod: pod.Name, Created: pod.CreationTimestamp.Time})
		e.wg.Go(func() { e.run(g, pod.DeepCopy(), prev) })
	}
}

// gone reacts to an engine pod removed from the API (deleted at once or
// by KWOK after its stop): an engine still running is killed.
func (e *Engines) gone(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	e.mu.Lock()
	g := e.byUID[pod.UID]
	if g != nil && !g.terminating {
		// Removed without a graceful deletion: the engine's life ends.
		g.terminating = true
		close(g.terminate)
	}
	e.mu.Unlock()
	if g != nil && !g.exited() {
		e.stopProcess(g, syscall.SIGKILL)
	}
}

// onKWOKNode reports whether pod is bound to a node KWOK plays. A node
// the cache has not seen yet is asked of the API server: the pod's next
// change may be far off.
func (e *Engines) onKWOKNode(pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	n, err := e.nodes.Get(pod.Spec.NodeName)
	if apierrors.IsNotFound(err) {
		ctx, cancel := context.WithTimeout(e.ctx, apiCallTimeout)
		defer cancel()
		n, err = e.c.Client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	}
	return err == nil && n.Labels[KWOKNodeLabel] == KWOKNodeValue
}

// note updates g's timing row.
func (e *Engines) note(g *engine, f func(*EngineTiming)) {
	for i := range e.timings {
		if e.timings[i].Pod == g.name {
			f(&e.timings[i])
		}
	}
}

// engine is one engine pod's process and its kubelet-side state.
type engine struct {
	uid                 types.UID
	namespace, name, ip string
	node                string
	model               string
	cmd                 *exec.Cmd // set under Engines.mu
	terminate, done     chan struct{}
	// terminating, started and ready are guarded by Engines.mu.
	terminating, started bool
	signalled            bool
	ready, readySet      bool
}

func (g *engine) addr() string { return net.JoinHostPort(g.ip, strconv.Itoa(EnginePort)) }

func (g *engine) exited() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// run is an engine pod's life: hold its start for the part of the load
// before the engine's container (splitLoad), start its process (once a
// previous engine on the same address has gone), probe it, and stop it
// when the pod terminates or the backer stops.
func (e *Engines) run(g *engine, pod *corev1.Pod, prev *engine) {
	quit := func(err error) {
		if err != nil {
			e.fail(fmt.Errorf("pod %s: %w", pod.Name, err))
		}
		close(g.done)
	}
	ctr := container(pod)
	model, args, err := e.simArgs(pod)
	if err != nil {
		quit(err)
		return
	}
	total, err := e.loadTime(pod.Namespace, model)
	if err != nil {
		quit(err)
		return
	}
	hold, load := splitLoad(ctr, total)
	held := time.NewTimer(e.c.Dur(hold))
	defer held.Stop()
	prevDone := closed()
	if prev != nil {
		prevDone = prev.done
	}
	for waiting := 2; waiting > 0; waiting-- {
		select {
		case <-held.C:
		case <-prevDone:
			prevDone = nil
		case <-g.terminate:
			quit(nil)
			e.markStopped(g)
			return
		case <-e.ctx.Done():
			quit(nil)
			return
		}
	}
	if err := e.startProcess(g, append(args, "--load-time="+load.String())); err != nil {
		quit(err)
		return
	}
	e.mu.Lock()
	g.started = true
	e.note(g, func(t *EngineTiming) { t.Started = time.Now() })
	e.mu.Unlock()
	e.probe(g, pod, ctr)
	if e.ctx.Err() != nil {
		e.stopProcess(g, syscall.SIGKILL)
		return
	}
	e.terminatePod(g, pod, ctr)
}
