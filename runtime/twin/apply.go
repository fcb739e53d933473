package twin

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// applyWait bounds the application of a set of objects.
const applyWait = 2 * time.Minute

// fieldManager is the twin's server-side apply manager.
const fieldManager = "llmplat-twin"

// Apply applies objs to the twin's API server (server-side apply, as
// kubectl apply --server-side does), in order.
func (c *Cluster) Apply(tb testing.TB, objs []*unstructured.Unstructured) {
	tb.Helper()
	if err := c.apply(objs); err != nil {
		tb.Fatal(err)
	}
}

func (c *Cluster) apply(objs []*unstructured.Unstructured) error {
	ctx, cancel := context.WithTimeout(context.Background(), applyWait)
	defer cancel()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			mapper.Reset() // a CRD installed since the last look
			if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				return fmt.Errorf("twin: apply %s %s: %w", gvk.Kind, o.GetName(), err)
			}
		}
		r := dyn.Resource(m.Resource)
		var ri dynamic.ResourceInterface = r
		if m.Scope.Name() == "namespace" {
			ri = r.Namespace(o.GetNamespace())
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("twin: apply %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}
