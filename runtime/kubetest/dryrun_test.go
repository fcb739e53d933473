package kubetest_test

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmplat/llmplat/runtime/kubetest"
)

// objects are the documents TestDryRun sends, in one stream.
const objects = `apiVersion: v1
kind: ConfigMap
metadata: {name: before-its-namespace, namespace: declared}
---
apiVersion: v1
kind: Namespace
metadata: {name: declared}
---
apiVersion: v1
kind: Namespace
metadata: {name: llmplat}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: elsewhere, namespace: undeclared}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: nowhere}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: unserved}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: strict, namespace: llmplat}
dat: {a: b}
`

// TestDryRun: DryRun creates the declared namespaces for real first,
// whatever their place in the list (one that exists already is accepted),
// and a bare one for a namespace nothing declares; it stores nothing
// else; it refuses a namespaced object without a namespace, a kind the
// server does not serve, and an unknown field.
func TestDryRun(t *testing.T) {
	env := kubetest.Start(t)
	objs, err := kubetest.Objects([]byte(objects))
	if err != nil {
		t.Fatal(err)
	}
	errs := env.DryRun(t, objs)
	want := []struct {
		name string
		ok   func(error) bool
	}{
		{"before-its-namespace", func(err error) bool { return err == nil }},
		{"declared", func(err error) bool { return err == nil }},
		{"llmplat", func(err error) bool { return err == nil }},
		{"elsewhere", func(err error) bool { return err == nil }},
		{"nowhere", func(err error) bool { return errors.Is(err, kubetest.ErrNoNamespace) }},
		{"unserved", meta.IsNoMatchError},
		{"strict", apierrors.IsBadRequest},
	}
	if len(errs) != len(want) {
		t.Fatalf("%d answers for %d objects", len(errs), len(want))
	}
	for i, w := range want {
		if got := objs[i].GetName(); got != w.name {
			t.Fatalf("object %d is %s, want %s", i, got, w.name)
		}
		if !w.ok(errs[i]) {
			t.Errorf("%s: answer %v", w.name, errs[i])
		}
	}

	ctx := context.Background()
	for _, ns := range []string{"declared", "undeclared"} {
		if _, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s not created: %v", ns, err)
		}
	}
	cms, err := env.Client.CoreV1().ConfigMaps("declared").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Name == "before-its-namespace" {
			t.Error("a dry run stored its ConfigMap")
		}
	}
}
