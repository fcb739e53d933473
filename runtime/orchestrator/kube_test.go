package orchestrator_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llmplat/llmplat/runtime/clusterwatch"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/kubetest"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// kubeCluster is a control plane whose replicas find their cloud nodes
// through a real API server: each runs its own controller.
type kubeCluster struct {
	*cluster
	k     kubetest.Env
	ctrls map[string]*clusterwatch.Controller
	stops map[string]func()
	// drains records, by replica, the cloud nodes its controller drained.
	drains map[string]*drainLog
	// mod, if set, adjusts the config of the replicas started after.
	mod func(*orchestrator.Config)
}

// newKubeCluster starts the API server namespace, the model's Service,
// three Kubernetes Nodes and replicas ids, each with a controller.
func newKubeCluster(t *testing.T, ids ...string) *kubeCluster {
	t.Helper()
	k := kubetest.Start(t)
	kc := &kubeCluster{cluster: newCluster(t), k: k, ctrls: map[string]*clusterwatch.Controller{},
		stops: map[string]func(){}, drains: map[string]*drainLog{}}
	ctx := t.Context()
	for _, n := range []string{"gpu-1", "gpu-2", "gpu-3"} {
		_, err := k.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: n + "-" + k.Namespace}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "vllm-" + testModel, Labels: map[string]string{clusterwatch.ModelLabel: testModel},
			Annotations: map[string]string{clusterwatch.ModelSpecAnnotation: "name=" + testModel +
				",served=sim-engine,max-num-seqs=64,max-model-len=4096,kv-tokens=200000,expected-load=780"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: clusterwatch.PortName, Port: 8000,
			TargetPort: intstr.FromString(clusterwatch.PortName)}}, Selector: map[string]string{"app": "vllm"}},
	}
	if _, err := k.Client.CoreV1().Services(k.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		kc.startReplica(id)
	}
	return kc
}

// engineDomain ends the engines' addresses in the EndpointSlices: the API
// server refuses loopback IPs, so the slices name the engines, and
// engineClient reaches every name under it on the loopback interface, as
// cluster DNS would reach the pod.
const engineDomain = ".engines.test"

// engineClient is the replicas' cloud client, resolving engineDomain.
func engineClient() *http.Client {
	c := engineclient.NewEngineClient()
	tr := c.Transport.(*http.Transport)
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || !strings.HasSuffix(host, engineDomain) {
			return nil, fmt.Errorf("engine address %q is not under %s", addr, engineDomain)
		}
		return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}
	return c
}

// hostName is Kubernetes Node n of this test.
func (kc *kubeCluster) hostName(n string) string { return n + "-" + kc.k.Namespace }

// startReplica starts replica id with its controller.
func (kc *kubeCluster) startReplica(id string) {
	t := kc.t
	var rep *replica
	log := &drainLog{}
	kc.drains[id] = log
	ctrl, err := clusterwatch.New(clusterwatch.Config{Client: kc.k.Client, Namespace: kc.k.Namespace, Identity: id,
		Drainer: clusterwatch.DrainerFuncs{
			Drain: func(ctx context.Context, ids []string, reason string) error {
				log.add(ids)
				return rep.o().DrainCloud(ctx, ids, reason)
			},
			Resume: func(ctx context.Context, ids []string, reason string) error {
				return rep.o().ResumeCloud(ctx, ids, reason)
			},
		},
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rep = kc.cluster.startReplica(id, func(cfg *orchestrator.Config) {
		cfg.Cloud, cfg.CloudClient = ctrl, engineClient()
		if kc.mod != nil {
			kc.mod(cfg)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := ctrl.Run(ctx); err != nil {
			t.Errorf("controller %s: %v", id, err)
		}
	})
	stop := sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	kc.ctrls[id], kc.stops[id] = ctrl, stop
}

// engineSlice publishes the engine at engineURL as pod on Kubernetes
// Node host in its own EndpointSlice of the model's Service.
func (kc *kubeCluster) engineSlice(pod, engineURL, host string, ready bool) {
	t := kc.t
	u, err := url.Parse(engineURL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	name, p, hostName := clusterwatch.PortName, int32(port), kc.hostName(host)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: pod, Labels: map[string]string{discoveryv1.LabelServiceName: "vllm-" + testModel}},
		AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{pod + engineDomain}, NodeName: &hostName,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: kc.k.Namespace}}},
		Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &p}},
	}
	api := kc.k.Client.DiscoveryV1().EndpointSlices(kc.k.Namespace)
	cur, err := api.Get(t.Context(), pod, metav1.GetOptions{})
	if err == nil {
		s.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(t.Context(), s, metav1.UpdateOptions{})
	} else {
		_, err = api.Create(t.Context(), s, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// routable waits until every replica may route to cloud node id.
func (kc *kubeCluster) routable(id string) {
	kc.t.Helper()
	kc.waitSnapshots("cloud node "+id+" healthy", id, func(n registry.Node, ok bool) bool {
		return ok && n.Healthy(time.Now())
	})
}

// dispatchAll sends n short jobs through replica r and returns how many
// finished on each engine.
func dispatchAll(t *testing.T, r *replica, prefix string, n int) {
	t.Helper()
	for i := range n {
		st, err := r.o().Dispatch(t.Context(), job(prefix+strconv.Itoa(i), 8))
		if err != nil {
			t.Fatalf("dispatch %d: %v", i, err)
		}
		if res := drain(st); !res.complete() {
			t.Fatalf("job %d ended with %v", i, res.err)
		}
	}
}

// TestKubeEndpointsRoute: a ready endpoint of the model's Service becomes a
// cloud node that every replica routes to; one that goes unready leaves
// routing, and no request reaches it after.
func TestKubeEndpointsRoute(t *testing.T) {
	kc := newKubeCluster(t, "orch-a", "orch-b")
	simA, urlA, _ := kc.startSim("a", enginesim.Config{ServedModelName: "sim-engine"})
	simB, urlB, _ := kc.startSim("b", enginesim.Config{ServedModelName: "sim-engine"})

	kc.engineSlice("vllm-a", urlA, "gpu-1", true)
	kc.routable("vllm-a")
	dispatchAll(t, kc.replicas[1], "first-", 2)
	if got := simA.Stats().Finished; got != 2 {
		t.Fatalf("engine a finished %d requests, want 2", got)
	}

	kc.engineSlice("vllm-b", urlB, "gpu-2", true)
	kc.routable("vllm-b")
	kc.engineSlice("vllm-a", urlA, "gpu-1", false)
	kc.waitSnapshots("unready vllm-a gone", "vllm-a", func(_ registry.Node, ok bool) bool { return !ok })
	dispatchAll(t, kc.replicas[0], "after-", 4)
	if got := simA.Stats().Finished; got != 2 {
		t.Errorf("engine a finished %d requests, want still 2 once unready", got)
	}
	if got := simB.Stats().Finished; got != 4 {
		t.Errorf("engine b finished %d requests, want 4", got)
	}
}

// TestKubeDisruptedNodeDrains: when Karpenter taints the Node an engine runs
// on, the leader drains it: every replica stops assigning it work, while
// the stream in flight on it runs to its end; the other replica does not
// act. When the leader goes, the other takes over and drains the next.
func TestKubeDisruptedNodeDrains(t *testing.T) {
	kc := newKubeCluster(t, "orch-a", "orch-b")
	simA, urlA, _ := kc.startSim("a", enginesim.Config{ServedModelName: "sim-engine"})
	simB, urlB, _ := kc.startSim("b", enginesim.Config{ServedModelName: "sim-engine"})
	_, urlC, _ := kc.startSim("c", enginesim.Config{ServedModelName: "sim-engine"})
	kc.engineSlice("vllm-a", urlA, "gpu-1", true)
	kc.routable("vllm-a")

	// A long stream on a, left unread after its first event so it stays in
	// flight: the relay's backpressure holds the engine.
	st, err := kc.replicas[0].o().Dispatch(t.Context(), job("long", 300))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("first event: %v", err)
	}
	kc.engineSlice("vllm-b", urlB, "gpu-2", true)
	kc.routable("vllm-b")

	leader := kc.leader()
	taint(t, kc, "gpu-1")
	kc.waitSnapshots("vllm-a draining", "vllm-a", func(n registry.Node, ok bool) bool {
		return ok && n.State == registry.StateDraining
	})
	dispatchAll(t, kc.replicas[1], "new-", 3)
	if got := simB.Stats().Finished; got != 3 {
		t.Errorf("engine b finished %d requests, want the 3 sent after the drain", got)
	}
	res := drain(st)
	if !res.complete() || res.usage == nil || res.usage.CompletionTokens == 0 {
		t.Fatalf("the stream in flight on the drained engine ended with %v, usage %+v; want it complete", res.err, res.usage)
	}
	if got := simA.Stats().Finished; got != 1 {
		t.Errorf("engine a finished %d requests, want only the stream in flight", got)
	}
	for id, l := range kc.drains {
		want := []string(nil)
		if id == leader {
			want = []string{"vllm-a"}
		}
		if got := l.get(); !slices.Equal(got, want) {
			t.Errorf("replica %s drained %v, want %v (leader %s)", id, got, want, leader)
		}
	}
	var events int
	if err := kc.db.QueryRowContext(t.Context(), `SELECT count(*) FROM node_events
		WHERE node_id = 'vllm-a' AND kind = 'drain' AND orchestrator_id = $1`, leader).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 1 {
		t.Errorf("%d drain events for vllm-a by %s, want 1", events, leader)
	}

	// The leader's controller stops (its pod goes): the other replica wins
	// the Lease and acts on the next disruption. b is not the model's last
	// engine then: c serves it on a Node that is not going.
	kc.engineSlice("vllm-c", urlC, "gpu-3", true)
	kc.routable("vllm-c")
	kc.stops[leader]()
	other := "orch-a"
	if leader == other {
		other = "orch-b"
	}
	testenv.Eventually(kc.t, "the other replica leads", kc.ctrls[other].Leading)
	taint(t, kc, "gpu-2")
	testenv.Eventually(kc.t, "the new leader drains vllm-b", func() bool { return slices.Contains(kc.drains[other].get(), "vllm-b") })
	kc.waitSnapshots("vllm-b draining", "vllm-b", func(n registry.Node, ok bool) bool {
		return ok && n.State == registry.StateDraining
	})
	if err := kc.db.QueryRowContext(t.Context(), `SELECT count(*) FROM node_events
		WHERE node_id = 'vllm-a' AND kind = 'drain'`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 1 {
		t.Errorf("%d drain events for vllm-a after the new leader went over it again, want still 1", events)
	}
}

// drainLog records the cloud nodes a controller asked to drain.
type drainLog struct {
	mu  sync.Mutex
	ids []string
}

func (l *drainLog) add(ids []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(l.ids, id) {
			l.ids = append(l.ids, id)
		}
	}
}

func (l *drainLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids)
}

// leader waits until exactly one controller leads and returns its replica.
func (kc *kubeCluster) leader() string {
	kc.t.Helper()
	var id string
	testenv.Eventually(kc.t, "one leader", func() bool {
		n := 0
		for rid, c := range kc.ctrls {
			if c.Leading() {
				id, n = rid, n+1
			}
		}
		return n == 1
	})
	return id
}

// taint marks Kubernetes Node host for disruption as Karpenter v1 does.
func taint(t *testing.T, kc *kubeCluster, host string) {
	t.Helper()
	api := kc.k.Client.CoreV1().Nodes()
	n, err := api.Get(t.Context(), kc.hostName(host), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule})
	if _, err := api.Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
