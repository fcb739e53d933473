package twin

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// SpotNotice is the warning EC2 gives a spot instance before it reclaims
// it: two minutes from the interruption notice to the instance's end.
const SpotNotice = 2 * time.Minute

// nodeClaims is Karpenter's NodeClaim resource.
var nodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// Interruption is a spot interruption the twin is playing.
type Interruption struct {
	// Node is the interrupted node; NodeClaim its claim, which the notice
	// deleted.
	Node, NodeClaim string
	// Noticed is when the notice was acted on; Reclaim when the instance
	// ends (Noticed + SpotNotice on the twin's clock).
	Noticed, Reclaim time.Time
	// Reclaimed gets, when the notice has run out, how many engines were
	// still running on the node and were killed with it (0: the drain was
	// over in time); it is closed without a value if the backer stops
	// first.
	Reclaimed <-chan int
}

// InterruptSpot plays an EC2 spot interruption of node as production
// meets it. On the notice (EC2's "Spot Instance Interruption Warning",
// which Karpenter's AWS provider reads from its SQS queue), Karpenter's
// interruption controller deletes the node's NodeClaim; Karpenter then
// taints the node karpenter.sh/disrupted:NoSchedule, evicts its pods
// (PodDisruptionBudgets and their grace periods apply) and terminates the
// instance. EC2 reclaims the instance when the notice runs out whatever
// is left on it: the twin kills the node's engines then (KillNode), on
// its clock. The kwok provider reads no queue, so the twin deletes the
// NodeClaim itself, as the interruption controller would.
//
// Not played: the AWS provider also marks the interrupted offering
// (instance type, zone, spot) unavailable for a while, so its replacement
// is bought elsewhere; the kwok provider has no such cache.
func (e *Engines) InterruptSpot(ctx context.Context, node string) (*Interruption, error) {
	dyn, err := dynamic.NewForConfig(e.c.Config)
	if err != nil {
		return nil, err
	}
	claims, err := dyn.Resource(nodeClaims).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("twin: list NodeClaims: %w", err)
	}
	claim := ""
	for _, nc := range claims.Items {
		if name, _, _ := unstructured.NestedString(nc.Object, "status", "nodeName"); name == node {
			claim = nc.GetName()
		}
	}
	if claim == "" {
		return nil, fmt.Errorf("twin: no NodeClaim for node %s", node)
	}
	if err := dyn.Resource(nodeClaims).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
		return nil, fmt.Errorf("twin: delete NodeClaim %s: %w", claim, err)
	}
	now := time.Now()
	reclaimed := make(chan int, 1)
	in := &Interruption{Node: node, NodeClaim: claim, Noticed: now, Reclaim: now.Add(e.c.Dur(SpotNotice)), Reclaimed: reclaimed}
	e.wg.Go(func() {
		defer close(reclaimed)
		select {
		case <-e.ctx.Done():
			return
		case <-time.After(time.Until(in.Reclaim)):
		}
		reclaimed <- e.KillNode(node)
	})
	return in, nil
}
