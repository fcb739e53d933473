package twin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/clusterwatch"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// coreKinds are the rendered kinds a bare control plane takes (no
// Karpenter, KEDA or Prometheus Operator CRDs).
var coreKinds = []string{"Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
	"Service", "PodDisruptionBudget", "ConfigMap"}

// TestPlatformRunsAsRendered: the rendered gateway and orchestrator
// Deployments run as processes with their pods' arguments: the gateway
// answers the admin API behind its Service's stand-in, and the
// orchestrators' controller reads the model Services from the twin's API
// server (its leader holds the Lease).
func TestPlatformRunsAsRendered(t *testing.T) {
	c := StartControlPlane(t, Options{Scale: 15})
	if c == nil {
		return
	}
	rendered := renderExample(t)
	applied, err := Substitute(Env{Scaler: c}, rendered)
	if err != nil {
		t.Fatal(err)
	}
	var core []*unstructured.Unstructured
	for _, o := range applied {
		if slices.Contains(coreKinds, o.GetKind()) {
			core = append(core, o)
		}
	}
	c.Apply(t, core)
	p := c.StartPlatform(t, BuildLLMPlat(t), rendered)
	if len(p.Gateways) != 3 || len(p.Orchestrators) != 2 {
		t.Fatalf("%d gateways and %d orchestrators, want the rendered 3 and 2", len(p.Gateways), len(p.Orchestrators))
	}
	admin, err := adminclient.NewClient(p.URL, p.AdminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNil(t, time.Minute, "the admin API answering through the gateways", func() error {
		_, err := admin.ListNodes(context.Background())
		return err
	})
	testenv.EventuallyNil(t, time.Minute, "an orchestrator leading the cluster controller", func() error {
		l, err := c.Client.CoordinationV1().Leases("llmplat").Get(context.Background(), clusterwatch.DefaultLeaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := l.Spec.HolderIdentity; h == nil || !strings.HasPrefix(*h, "llmplat-orchestrator-") {
			return fmt.Errorf("lease holder %v", h)
		}
		return nil
	})
}
