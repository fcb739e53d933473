package twin

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// disruptedTaint is the taint Karpenter puts on a Node it has chosen to
// disrupt, before it launches the Node's replacement.
const disruptedTaint = "karpenter.sh/disrupted"

// nodeLife is when the twin saw a GPU node's steps, in twin time since the
// recording began (zero: not seen).
type nodeLife struct {
	Pool                    string
	Joined, Disrupted, Gone time.Duration
}

// podLife is an engine pod as the twin last saw it.
type podLife struct {
	Model, Node     string
	Ready, Deleting bool
	Gone            bool
}

// watchCluster marks on r.tl every GPU node's arrival, disruption taint
// and departure, and every engine pod's node, readiness, deletion and
// departure, every period until stop is called, which returns the nodes'
// steps. What is there when it starts is not marked.
func (r *twinRun) watchCluster(ctx context.Context, period time.Duration) (stop func() map[string]*nodeLife) {
	nodes := map[string]*nodeLife{}
	pods := map[string]*podLife{}
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := true
		for {
			nl, nerr := r.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodePoolLabel})
			pl, perr := r.c.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: modelLabel})
			if nerr == nil && perr == nil {
				mu.Lock()
				r.noteNodes(nodes, nl.Items, first)
				r.notePods(pods, pl.Items, first)
				first = false
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(period):
			}
		}
	}()
	return func() map[string]*nodeLife {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return nodes
	}
}

// noteNodes marks the GPU nodes' changes since seen.
func (r *twinRun) noteNodes(seen map[string]*nodeLife, items []corev1.Node, quiet bool) {
	now := r.tl.Now()
	here := map[string]bool{}
	for _, n := range items {
		here[n.Name] = true
		l := seen[n.Name]
		if l == nil {
			l = &nodeLife{Pool: n.Labels[nodePoolLabel]}
			seen[n.Name] = l
			if !quiet {
				l.Joined = now
				r.tl.Mark(fmt.Sprintf("node %s joined (%s, %s)", n.Name, l.Pool, n.Labels[corev1.LabelInstanceTypeStable]))
			}
		}
		if l.Disrupted == 0 && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == disruptedTaint }) {
			l.Disrupted = now
			r.tl.Mark(fmt.Sprintf("node %s tainted %s", n.Name, disruptedTaint))
		}
	}
	for name, l := range seen {
		if !here[name] && l.Gone == 0 {
			l.Gone = now
			r.tl.Mark(fmt.Sprintf("node %s gone", name))
		}
	}
}

// notePods marks the engine pods' changes since seen.
func (r *twinRun) notePods(seen map[string]*podLife, items []corev1.Pod, quiet bool) {
	here := map[string]bool{}
	for _, p := range items {
		here[p.Name] = true
		now := podLife{Model: p.Labels[modelLabel], Node: p.Spec.NodeName, Ready: podReady(&p) && p.DeletionTimestamp == nil,
			Deleting: p.DeletionTimestamp != nil}
		was, ok := seen[p.Name]
		seen[p.Name] = &now
		if quiet {
			continue
		}
		if !ok {
			was = &podLife{}
			r.tl.Mark(fmt.Sprintf("pod %s (%s) created", p.Name, now.Model))
		}
		if now.Node != "" && was.Node == "" {
			r.tl.Mark(fmt.Sprintf("pod %s on node %s", p.Name, now.Node))
		}
		if now.Ready != was.Ready {
			r.tl.Mark(fmt.Sprintf("pod %s ready %v", p.Name, now.Ready))
		}
		if now.Deleting && !was.Deleting {
			r.tl.Mark(fmt.Sprintf("pod %s terminating", p.Name))
		}
	}
	for name, l := range seen {
		if !here[name] && !l.Gone {
			l.Gone = true
			r.tl.Mark(fmt.Sprintf("pod %s gone", name))
		}
	}
}
