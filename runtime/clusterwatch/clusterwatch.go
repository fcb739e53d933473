package clusterwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
)

// The names the rendered manifests and the controller agree on.
const (
	// ModelLabel marks a model's Service; its value is the model's name.
	ModelLabel = "llmplat.io/model"
	// ModelSpecAnnotation on the Service gives the engine's limits in the
	// node agent's -model syntax: name=…,served=…,max-num-seqs=…,
	// max-model-len=…,kv-tokens=…, and optionally expected-load=…
	// (ExpectedLoadKey). The Service exists at zero replicas, so the
	// annotation is read then too (ParseModelSpec).
	ModelSpecAnnotation = "llmplat.io/model-spec"
	// ExpectedLoadKey is the annotation's field giving the whole seconds a
	// replica is expected to take from zero to Ready (a node launched, the
	// weights synced and loaded): the Retry-After a model at zero starts
	// from. Absent, the orchestrators use coldstart.DefaultExpectedLoad.
	ExpectedLoadKey = "expected-load"
	// PortName is the name of the engine's port in the Service (and so in
	// its EndpointSlices); a slice with a single port may leave it unnamed.
	PortName = "http"
	// DefaultLeaseName is the Lease the replicas elect a leader with.
	DefaultLeaseName = "llmplat-orchestrator-controller"
)

// Disruption taints: Karpenter v1 marks a Node it is about to disrupt
// (consolidation, drift, expiry, a spot interruption notice) with the
// first; Karpenter before v1 used the second; the AWS Node Termination
// Handler's taints share the third prefix.
const (
	taintDisrupted  = "karpenter.sh/disrupted"
	taintDisruption = "karpenter.sh/disruption"
	taintNTHPrefix  = "aws-node-termination-handler/"
)

// Drainer takes cloud nodes out of routing cluster-wide, and puts back
// those that are their model's last ready engines again: the
// orchestrator's DrainCloud and ResumeCloud.
type Drainer interface {
	DrainCloud(ctx context.Context, nodeIDs []string, reason string) error
	ResumeCloud(ctx context.Context, nodeIDs []string, reason string) error
}

// DrainerFuncs adapts two functions to Drainer.
type DrainerFuncs struct {
	Drain, Resume func(ctx context.Context, nodeIDs []string, reason string) error
}

// DrainCloud calls f.Drain.
func (f DrainerFuncs) DrainCloud(ctx context.Context, nodeIDs []string, reason string) error {
	return f.Drain(ctx, nodeIDs, reason)
}

// ResumeCloud calls f.Resume.
func (f DrainerFuncs) ResumeCloud(ctx context.Context, nodeIDs []string, reason string) error {
	return f.Resume(ctx, nodeIDs, reason)
}

// Config configures a Controller.
type Config struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// Namespace holds the models' Services and the Lease.
	Namespace string
	// Identity is this replica's name in the Lease (its replica id).
	Identity string
	// Drainer drains the engines of a disrupted Node and resumes the
	// stranded ones; the leader calls it.
	Drainer Drainer
	// LeaseName is the Lease's name; empty means DefaultLeaseName.
	LeaseName string
	// LeaseDuration, RenewDeadline and RetryPeriod tune the election; zero
	// means 15 s, 10 s and 2 s, client-go's usual values.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger receives the controller's logs; nil discards them.
	Logger *slog.Logger
}

// Controller watches the cluster for one orchestrator replica. It is the
// replica's orchestrator.CloudSource.
type Controller struct {
	cfg      Config
	factory  informers.SharedInformerFactory
	nodesInf informers.SharedInformerFactory
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced

	changed chan struct{} // CloudNodes may have changed; size 1
	kick    chan struct{} // the leader should look for disruptions; size 1
	leading atomic.Bool

	mu    sync.Mutex
	cloud []orchestrator.CloudNode
	// loads are the models' expected load times from their Services,
	// with or without endpoints.
	loads map[string]time.Duration
	// models are the models with a Service.
	models []string
	// engines maps every endpoint's cloud node id, ready or not, to its
	// Kubernetes Node and model: the leader drains by it.
	engines map[string]engine
	// held are the cloud nodes this leader keeps in routing on a disrupted
	// Node, each its model's last ready engine (stranded).
	held map[string]bool
	// drained are the cloud nodes this leader drained; a new leader
	// starts empty and relies on the drain being idempotent.
	drained map[string]bool
}

// New returns a controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("clusterwatch: a Kubernetes client is required")
	case cfg.Namespace == "":
		return nil, errors.New("clusterwatch: a namespace is required")
	case !nodeproto.ValidID(cfg.Identity):
		return nil, fmt.Errorf("clusterwatch: identity %q", cfg.Identity)
	case cfg.Drainer == nil:
		return nil, errors.New("clusterwatch: a drainer is required")
	}
	if cfg.LeaseName == "" {
		cfg.LeaseName = DefaultLeaseName
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = 10 * time.Second
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Controller{cfg: cfg, changed: make(chan struct{}, 1), kick: make(chan struct{}, 1),
		engines: map[string]engine{}, drained: map[string]bool{}, held: map[string]bool{}}
	// Resync 0: the informers' watches deliver every change; nothing polls.
	c.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(cfg.Namespace))
	c.nodesInf = informers.NewSharedInformerFactory(cfg.Client, 0)
	svc := c.factory.Core().V1().Services()
	eps := c.factory.Discovery().V1().EndpointSlices()
	nodes := c.nodesInf.Core().V1().Nodes()
	c.services, c.slices, c.nodes = svc.Lister(), eps.Lister(), nodes.Lister()
	onChange := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.rebuild() },
		UpdateFunc: func(any, any) { c.rebuild() },
		DeleteFunc: func(any) { c.rebuild() },
	}
	onNode := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.kickLeader() },
		UpdateFunc: func(any, any) { c.kickLeader() },
	}
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{{svc.Informer(), onChange}, {eps.Informer(), onChange}, {nodes.Informer(), onNode}} {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("clusterwatch: %w", err)
		}
		c.synced = append(c.synced, h.inf.HasSynced)
	}
	return c, nil
}

// CloudNodes returns the ready endpoints of the models' Services.
func (c *Controller) CloudNodes() []orchestrator.CloudNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.cloud)
}

var _ orchestrator.ExpectedLoads = (*Controller)(nil)

// ExpectedLoad returns the load time model's Service announces
// (ExpectedLoadKey), if it announces one.
func (c *Controller) ExpectedLoad(model string) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.loads[model]
	return d, ok
}

// Changed delivers a value whenever CloudNodes may have changed.
func (c *Controller) Changed() <-chan struct{} { return c.changed }

// Leading reports whether this replica holds the Lease.
func (c *Controller) Leading() bool { return c.leading.Load() }

// Run watches until ctx ends: it waits for the informers' first lists,
// then takes part in the election, acting on disruptions while it leads.
func (c *Controller) Run(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	c.nodesInf.Start(ctx.Done())
	defer c.factory.Shutdown()
	defer c.nodesInf.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		if ctx.Err() != nil {
			return nil // stopped before the first lists arrived
		}
		return fmt.Errorf("clusterwatch: caches not synced: %w", context.Cause(ctx))
	}
	c.rebuild()
	c.cfg.Logger.Info("cluster watch started", "namespace", c.cfg.Namespace)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1ObjectMeta(c.cfg.LeaseName, c.cfg.Namespace),
		Client:     c.cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.cfg.Identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true, Name: c.cfg.LeaseName,
			LeaseDuration: c.cfg.LeaseDuration, RenewDeadline: c.cfg.RenewDeadline, RetryPeriod: c.cfg.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: c.lead,
				OnStoppedLeading: func() { c.leading.Store(false) },
			},
		})
		if err != nil {
			return fmt.Errorf("clusterwatch: leader election: %w", err)
		}
		// Run returns when leadership is lost (or never won before ctx
		// ends); a replica that lost it stands again.
		le.Run(ctx)
	}
	return nil
}

// lead acts on disruptions until ctx (the term) ends.
func (c *Controller) lead(ctx context.Context) {
	c.leading.Store(true)
	c.cfg.Logger.Info("leading the cluster watch", "identity", c.cfg.Identity)
	c.mu.Lock()
	clear(c.drained)
	clear(c.held)
	c.mu.Unlock()
	// A drain that failed (Redis away) is tried again on the next event
	// or at this period.
	t := time.NewTicker(c.cfg.RetryPeriod * 5)
	defer t.Stop()
	for {
		c.drainDisrupted(ctx)
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
		}
	}
}

// drainDisrupted drains the engines on every disrupted Node that this
// leader has not drained yet, but for those it holds: a model's last
// ready engines (stranded), which stay in routing until a replica of the
// model is ready on another Node, or their pods go. An engine drained
// while another served its model is put back when it is stranded again
// (that other one went: a scale-in, a crash).
func (c *Controller) drainDisrupted(ctx context.Context) {
	reasons, err := c.disrupted()
	if err != nil {
		return
	}
	c.cfg.Logger.Debug("looking for disruptions", "disrupted", reasons)
	if len(reasons) == 0 {
		return
	}
	byReason := map[string][]string{}
	var hold []string
	c.mu.Lock()
	keep := stranded(c.engines, reasons)
	for id, e := range c.engines {
		r, ok := reasons[e.host]
		switch {
		case !ok:
		case keep[id]:
			if !c.held[id] {
				hold = append(hold, id)
			}
		case !c.drained[id]:
			byReason[r] = append(byReason[r], id)
		}
	}
	c.mu.Unlock()
	c.hold(ctx, hold, reasons)
	for reason, ids := range byReason {
		slices.Sort(ids)
		if err := c.cfg.Drainer.DrainCloud(ctx, ids, reason); err != nil {
			c.cfg.Logger.Warn("cloud nodes not drained", "nodes", ids, "reason", reason, "err", err)
			continue
		}
		c.mu.Lock()
		for _, id := range ids {
			c.drained[id] = true
			delete(c.held, id)
		}
		c.mu.Unlock()
	}
}

// hold keeps the stranded engines ids in routing: it resumes those a
// drain took out (this leader's or an earlier one's) and marks them held.
func (c *Controller) hold(ctx context.Context, ids []string, reasons map[string]string) {
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	if err := c.cfg.Drainer.ResumeCloud(ctx, ids, "the last ready engines of their model"); err != nil {
		c.cfg.Logger.Warn("stranded cloud nodes not resumed", "nodes", ids, "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		e := c.engines[id]
		c.held[id] = true
		delete(c.drained, id)
		c.cfg.Logger.Info("cloud node held in routing: the last ready engine of its model", "node_id", id, "model", e.model,
			"reason", reasons[e.host])
	}
}

// disruption says why Node n is going, or "" when it is not.
func disruption(n *corev1.Node) string {
	host := "node " + n.Name
	for _, t := range n.Spec.Taints {
		switch {
		case t.Key == taintDisrupted || t.Key == taintDisruption:
			return host + " disrupted by Karpenter (" + t.Key + ")"
		case strings.HasPrefix(t.Key, taintNTHPrefix):
			return host + " interruption notice (" + t.Key + ")"
		}
	}
	switch {
	case n.DeletionTimestamp != nil:
		return host + " being deleted"
	case n.Spec.Unschedulable:
		return host + " cordoned"
	}
	return ""
}

// kickLeader asks the leader to look for disruptions now.
func (c *Controller) kickLeader() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// rebuild recomputes the cloud nodes from the informers' caches and
// signals a change.
func (c *Controller) rebuild() {
	cloud, engines, loads, models := c.compute()
	c.mu.Lock()
	c.cloud, c.engines, c.loads, c.models = cloud, engines, loads, models
	for id := range c.drained {
		if _, ok := engines[id]; !ok {
			delete(c.drained, id) // the pod is gone
		}
	}
	for id := range c.held {
		if _, ok := engines[id]; !ok {
			delete(c.held, id)
		}
	}
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
	c.kickLeader()
}

// compute reads the models' Services and their EndpointSlices.
func (c *Controller) compute() ([]orchestrator.CloudNode, map[string]engine, map[string]time.Duration, []string) {
	engines, loads := map[string]engine{}, map[string]time.Duration{}
	var models []string
	var cloud []orchestrator.CloudNode
	sel, _ := labels.Parse(ModelLabel)
	svcs, err := c.services.List(sel)
	if err != nil {
		return nil, engines, loads, nil
	}
	slices.SortFunc(svcs, func(a, b *corev1.Service) int { return strings.Compare(a.Name, b.Name) })
	seen := map[string]bool{}
	for _, svc := range svcs {
		slot, load, err := modelSlot(svc)
		if err != nil {
			c.cfg.Logger.Warn("model service ignored", "service", svc.Name, "err", err)
			continue
		}
		models = append(models, slot.Name)
		if load > 0 {
			loads[slot.Name] = load
		}
		eps, err := c.slices.List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name}))
		if err != nil {
			continue
		}
		// IPv4 slices before IPv6 ones, so a dual-stack pod is reached
		// the same way on every replica.
		slices.SortFunc(eps, func(a, b *discoveryv1.EndpointSlice) int {
			return strings.Compare(string(a.AddressType)+a.Name, string(b.AddressType)+b.Name)
		})
		for _, s := range eps {
			port, ok := slicePort(s)
			if !ok {
				continue
			}
			for _, ep := range s.Endpoints {
				id := endpointID(ep)
				if id == "" || len(ep.Addresses) == 0 || seen[id] {
					continue
				}
				seen[id] = true
				e := engine{model: slot.Name, ready: ready(ep)}
				if ep.NodeName != nil {
					e.host = *ep.NodeName
				}
				engines[id] = e
				if !e.ready {
					continue
				}
				cn := orchestrator.CloudNode{ID: id, URL: "http://" + net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port))),
					Models: []registry.ModelSlot{slot}, Host: e.host}
				cloud = append(cloud, cn)
			}
		}
	}
	return cloud, engines, loads, models
}

// modelSlot reads a model Service's engine limits and expected load time
// (zero when it announces none).
func modelSlot(svc *corev1.Service) (registry.ModelSlot, time.Duration, error) {
	spec, ok := svc.Annotations[ModelSpecAnnotation]
	if !ok {
		return registry.ModelSlot{}, 0, fmt.Errorf("no %s annotation", ModelSpecAnnotation)
	}
	m, load, err := ParseModelSpec(spec)
	if err != nil {
		return registry.ModelSlot{}, 0, err
	}
	if m.Name != svc.Labels[ModelLabel] {
		return registry.ModelSlot{}, 0, fmt.Errorf("%s names model %q, the label %q", ModelSpecAnnotation, m.Name, svc.Labels[ModelLabel])
	}
	return registry.ModelSlot{Name: m.Name, ServedName: m.ServedName, MaxNumSeqs: m.MaxNumSeqs,
		MaxModelLen: m.MaxModelLen, KVCapacityTokens: m.KVCapacityTokens}, load, nil
}

// maxExpectedLoad bounds an announced load time: a day is far past any
// cold start, and a larger value is a mistake, not a model.
const maxExpectedLoad = 24 * time.Hour

// ParseModelSpec reads a ModelSpecAnnotation: the engine's limits in the
// node agent's -model syntax, and the optional ExpectedLoadKey in whole
// seconds (zero when absent). The node agent does not take that field —
// an agent's engine is loaded before it registers — so it is taken out
// here before the rest is read as the agent reads it.
func ParseModelSpec(spec string) (nodeproto.Model, time.Duration, error) {
	var rest []string
	var load time.Duration
	seen := false
	for part := range strings.SplitSeq(spec, ",") {
		k, v, _ := strings.Cut(part, "=")
		if k != ExpectedLoadKey {
			rest = append(rest, part)
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if seen || err != nil || n <= 0 || time.Duration(n)*time.Second > maxExpectedLoad {
			return nodeproto.Model{}, 0, fmt.Errorf("%s: %s=%q: want once, whole seconds from 1 to %d",
				ModelSpecAnnotation, ExpectedLoadKey, v, int(maxExpectedLoad/time.Second))
		}
		seen, load = true, time.Duration(n)*time.Second
	}
	m, err := nodeagent.ParseModel(strings.Join(rest, ","))
	if err != nil {
		return nodeproto.Model{}, 0, err
	}
	return m, load, nil
}

// slicePort is the engine's port in s: the one named PortName, or the
// only one.
func slicePort(s *discoveryv1.EndpointSlice) (int32, bool) {
	for _, p := range s.Ports {
		if p.Port != nil && p.Name != nil && *p.Name == PortName {
			return *p.Port, true
		}
	}
	if len(s.Ports) == 1 && s.Ports[0].Port != nil {
		return *s.Ports[0].Port, true
	}
	return 0, false
}

// endpointID names an endpoint's cloud node: its pod's name, which is
// unique and never reused, else its hostname.
func endpointID(ep discoveryv1.Endpoint) string {
	var id string
	switch {
	case ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && ep.TargetRef.Name != "":
		id = ep.TargetRef.Name
	case ep.Hostname != nil:
		id = *ep.Hostname
	}
	if !nodeproto.ValidID(id) {
		return ""
	}
	return id
}

// ready reports whether an endpoint takes new work: ready and not
// terminating. A nil condition is unknown, which the API asks consumers to
// read as ready.
func ready(ep discoveryv1.Endpoint) bool {
	if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
		return false
	}
	return ep.Conditions.Terminating == nil || !*ep.Conditions.Terminating
}

// metav1ObjectMeta names the Lease.
func metav1ObjectMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}
