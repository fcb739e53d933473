package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// What kubernetes_objects says of an object that is not as applied.
const (
	driftAbsent  = "absent from the cluster"
	driftChanged = "changed outside Terraform"
)

// errNotServed is a kind the cluster does not serve.
var errNotServed = errors.New("the cluster does not serve the kind")

// kubeObject is one rendered object and the digest of what it declares.
type kubeObject struct {
	obj    *unstructured.Unstructured
	key    string // Kind/namespace/name
	digest string
}

// decodeObjects splits a rendered manifest into its objects.
func decodeObjects(data []byte) ([]kubeObject, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []kubeObject
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("rendered manifest: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		canon, err := json.Marshal(m) // maps marshal with sorted keys
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(canon)
		out = append(out, kubeObject{obj: u, key: u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName(),
			digest: "sha256:" + hex.EncodeToString(sum[:12])})
	}
}

// digests is the objects' planned kubernetes_objects.
func digests(objs []kubeObject) map[string]string {
	out := make(map[string]string, len(objs))
	for _, o := range objs {
		out[o.key] = o.digest
	}
	return out
}

// resource is the client of o's kind in o's namespace. A kind the cached
// discovery does not know is looked up once more (a CRD installed since),
// and a kind the cluster does not serve is named: KEDA not installed.
func (k *kubeAccess) resource(o kubeObject) (dynamic.ResourceInterface, error) {
	dyn, mapper, err := k.clients()
	if err != nil {
		return nil, err
	}
	gvk := o.obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if noKind(err) {
		mapper.Reset()
		m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if noKind(err) {
		return nil, fmt.Errorf("%w: %s (%s) is not installed (a ScaledObject needs KEDA)", errNotServed, gvk.Kind, gvk.GroupVersion())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.key, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return dyn.Resource(m.Resource).Namespace(o.obj.GetNamespace()), nil
	}
	return dyn.Resource(m.Resource), nil
}

// apply server-side applies the objects as fieldManager, taking back any
// field someone else changed (force): the configuration is the truth.
func (k *kubeAccess) apply(ctx context.Context, objs []kubeObject, dryRun bool) ([]*unstructured.Unstructured, error) {
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		ri, err := k.resource(o)
		if err != nil {
			return nil, err
		}
		got, err := ri.Apply(ctx, o.obj.GetName(), o.obj, opts)
		if err != nil {
			return nil, fmt.Errorf("apply %s: %w", o.key, err)
		}
		out = append(out, got)
	}
	return out, nil
}

// observe compares each object in the cluster with what applying it again
// would make of it: equal is in sync (its digest), a difference is a field
// of ours changed outside Terraform, and a missing object is absent.
func (k *kubeAccess) observe(ctx context.Context, objs []kubeObject) (map[string]string, error) {
	out := make(map[string]string, len(objs))
	for _, o := range objs {
		ri, err := k.resource(o)
		if errors.Is(err, errNotServed) {
			out[o.key] = driftAbsent
			continue
		}
		if err != nil {
			return nil, err
		}
		live, err := ri.Get(ctx, o.obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			out[o.key] = driftAbsent
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", o.key, err)
		}
		want, err := k.apply(ctx, []kubeObject{o}, true)
		if err != nil {
			return nil, err
		}
		if reflect.DeepEqual(comparable(live), comparable(want[0])) {
			out[o.key] = o.digest
		} else {
			out[o.key] = driftChanged
		}
	}
	return out, nil
}

// comparable is an object without what the server changes on its own.
func comparable(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	for _, f := range [][]string{{"metadata", "managedFields"}, {"metadata", "resourceVersion"}, {"metadata", "generation"}, {"status"}} {
		unstructured.RemoveNestedField(c.Object, f...)
	}
	return c.Object
}

// remove deletes the objects; those already gone are fine. Dependents
// (the Deployment's pods) go in the background, as kubectl delete does.
func (k *kubeAccess) remove(ctx context.Context, objs []kubeObject) error {
	background := metav1.DeletePropagationBackground
	for _, o := range objs {
		ri, err := k.resource(o)
		if errors.Is(err, errNotServed) {
			continue // nothing of the kind can exist
		}
		if err != nil {
			return err
		}
		err = ri.Delete(ctx, o.obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", o.key, err)
		}
	}
	return nil
}
