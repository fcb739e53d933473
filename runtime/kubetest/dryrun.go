package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/llmplat/llmplat/runtime/k8sschema"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// requestTimeout bounds one request of DryRun: the server answers a dry
// run in milliseconds; a minute leaves room for a loaded CI machine and
// still ends a test whose server hangs.
const requestTimeout = time.Minute

// decodeBuffer is how far the YAML decoder looks ahead to tell YAML from
// JSON (the size apimachinery's own callers use).
const decodeBuffer = 4096

// ErrNoNamespace means a namespaced object names no namespace: applied as
// it is, it would land in whatever namespace the client defaults to.
var ErrNoNamespace = errors.New("namespaced object without a namespace")

// StartPlatform is Start with the CustomResourceDefinitions the
// platform's manifests use (k8sschema.CRDs), read from their Go modules at
// the pinned versions. Without those modules the test is skipped, and
// fails under CI=true, as without the API server.
func StartPlatform(tb testing.TB) Env {
	tb.Helper()
	crds, err := k8sschema.CRDs()
	if err != nil {
		testenv.Missing(tb, "a module with the platform's CRDs", err.Error(),
			"run the tests through make (make test), which downloads the modules first")
		return Env{}
	}
	return Start(tb, crds...)
}

// Objects decodes a stream of YAML documents, or JSON objects, into one
// object each, skipping empty documents.
func Objects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), decodeBuffer)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode manifest: %w", err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// DryRun asks the API server to create each object with dryRun=All and
// fieldValidation=Strict, as `kubectl create --dry-run=server
// --validate=strict` does: the server decodes the object strictly (an
// unknown or duplicate field is an error), checks it against its built-in
// validation or its CRD's schema and CEL rules, and runs the admission
// chain, but stores nothing. It returns one error per object, nil where
// the object was accepted; an error wraps the server's (apierrors tells
// the reasons apart).
//
// Namespaces must exist for a namespaced object to be admitted, so they
// are created for real first: each Namespace object in objs (under strict
// validation too), then a bare one for any other namespace an object
// names. A Namespace that exists already counts as accepted: the server
// decodes and validates an object before it looks its name up.
func (e Env) DryRun(tb testing.TB, objs []*unstructured.Unstructured) []error {
	tb.Helper()
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		tb.Fatalf("kubetest: dynamic client: %v", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		tb.Fatalf("kubetest: discovery client: %v", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	errs := make([]error, len(objs))
	mappings := make([]*meta.RESTMapping, len(objs))
	for i, o := range objs {
		gvk := o.GroupVersionKind()
		if mappings[i], err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			errs[i] = fmt.Errorf("%s: %w", describe(o), err)
		}
	}
	created := map[string]bool{}
	for i, o := range objs {
		if errs[i] != nil || o.GroupVersionKind() != corev1.SchemeGroupVersion.WithKind("Namespace") {
			continue
		}
		errs[i] = e.create(dyn, mappings[i], o, false)
		if apierrors.IsAlreadyExists(errs[i]) {
			errs[i] = nil
		}
		created[o.GetName()] = errs[i] == nil
	}
	for i, o := range objs {
		if errs[i] != nil || mappings[i].Scope.Name() != meta.RESTScopeNameNamespace {
			continue
		}
		ns := o.GetNamespace()
		if ns == "" {
			errs[i] = fmt.Errorf("%s: %w", describe(o), ErrNoNamespace)
			continue
		}
		if _, ok := created[ns]; !ok {
			e.ensureNamespace(tb, ns)
			created[ns] = true
		}
	}
	for i, o := range objs {
		if errs[i] != nil || o.GroupVersionKind() == corev1.SchemeGroupVersion.WithKind("Namespace") {
			continue
		}
		errs[i] = e.create(dyn, mappings[i], o, true)
	}
	return errs
}

// create creates o under strict field validation, only as a dry run when
// dryRun is set.
func (e Env) create(dyn dynamic.Interface, m *meta.RESTMapping, o *unstructured.Unstructured, dryRun bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var client dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		client = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	if _, err := client.Create(ctx, o, opts); err != nil {
		return fmt.Errorf("%s: %w", describe(o), err)
	}
	return nil
}

// ensureNamespace creates the namespace name unless it exists.
func (e Env) ensureNamespace(tb testing.TB, name string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("kubetest: create namespace %s: %v", name, err)
	}
}

// describe names o as kubectl does: kind, namespace and name.
func describe(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), ns, o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}
