package clusterwatch

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
)

// engine is an endpoint of a model's Service as the controller last read
// it.
type engine struct {
	// host is the Kubernetes Node it runs on ("" when the slice does not
	// say); model the model its Service serves.
	host, model string
	// ready: it takes new work (ready and not terminating).
	ready bool
}

// disrupted maps every Node being disrupted to why (disruption).
func (c *Controller) disrupted() (map[string]string, error) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	reasons := map[string]string{}
	for _, n := range nodes {
		if r := disruption(n); r != "" {
			reasons[n.Name] = r
		}
	}
	return reasons, nil
}

// stranded returns the ready engines on disrupted Nodes whose model has
// no ready engine on any other Node. Draining them would leave the model
// with nothing to serve it while their pods still run: a
// PodDisruptionBudget that keeps a model's last replica holds such a pod
// on a drifted or expired Node until another replica is ready, or for as
// long as the NodePool's terminationGracePeriod. So the leader keeps them
// in routing, and the gauge StrandedDesc asks the autoscaler for a
// replica elsewhere; once one is ready they are no longer stranded and
// drain as any other.
func stranded(engines map[string]engine, disrupted map[string]string) map[string]bool {
	elsewhere := map[string]bool{}
	for _, e := range engines {
		if _, going := disrupted[e.host]; e.ready && !going {
			elsewhere[e.model] = true
		}
	}
	out := map[string]bool{}
	for id, e := range engines {
		if _, going := disrupted[e.host]; e.ready && going && !elsewhere[e.model] {
			out[id] = true
		}
	}
	return out
}

// StrandedDesc is the per-model gauge of stranded replicas, which the
// ScaledObject of a model that may run a single replica scales on.
var StrandedDesc = prometheus.NewDesc("llmplat_model_stranded_replicas",
	"Ready replicas of the model on Kubernetes Nodes being disrupted (Karpenter's taint, a cordon, a deletion) "+
		"while it has no ready replica on any other Node: the orchestrators keep them in routing until one is. "+
		"Every replica reports it from its own watch; it exists for every model with a Service.",
	[]string{"model"}, nil)

var _ prometheus.Collector = (*Controller)(nil)

// Describe sends StrandedDesc.
func (c *Controller) Describe(ch chan<- *prometheus.Desc) { ch <- StrandedDesc }

// Collect reports the stranded replicas of every model with a Service, as
// this replica's watch sees them now.
func (c *Controller) Collect(ch chan<- prometheus.Metric) {
	reasons, err := c.disrupted()
	if err != nil {
		return
	}
	c.mu.Lock()
	counts := map[string]int{}
	for _, m := range c.models {
		counts[m] = 0
	}
	for id := range stranded(c.engines, reasons) {
		counts[c.engines[id].model]++
	}
	c.mu.Unlock()
	for m, n := range counts {
		ch <- prometheus.MustNewConstMetric(StrandedDesc, prometheus.GaugeValue, float64(n), m)
	}
}
