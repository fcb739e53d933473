package provider

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplat/llmplat/runtime/kubetest"
)

// readPlatformManifests runs llmplat_platform_manifests' Read on a
// description, as Terraform would, and returns its manifests attribute.
func readPlatformManifests(t *testing.T, description string, includeModels bool) map[string]string {
	t.Helper()
	ctx := context.Background()
	ds := platformManifestsDataSource{}
	var sr datasource.SchemaResponse
	ds.Schema(ctx, datasource.SchemaRequest{}, &sr)
	config := tftypes.NewValue(sr.Schema.Type().TerraformType(ctx), map[string]tftypes.Value{
		"description":    tftypes.NewValue(tftypes.String, description),
		"include_models": tftypes.NewValue(tftypes.Bool, includeModels),
		"manifests":      tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, nil),
	})
	resp := datasource.ReadResponse{State: tfsdk.State{Schema: sr.Schema, Raw: config}}
	ds.Read(ctx, datasource.ReadRequest{Config: tfsdk.Config{Schema: sr.Schema, Raw: config}}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatalf("read: %v", resp.Diagnostics)
	}
	var manifests map[string]string
	if d := resp.State.GetAttribute(ctx, path.Root("manifests"), &manifests); d.HasError() {
		t.Fatalf("manifests: %v", d)
	}
	return manifests
}

// TestPlatformManifestsServerDryRun: every object llmplat_platform_manifests
// gives for examples/platform.yaml, the models' included, is accepted by
// a real API server serving the Karpenter, KEDA and Prometheus Operator
// CRDs at the pinned versions, created with dryRun=All under strict field
// validation (CEL rules included), as kubernetes_manifest would apply it.
// (runtime/render's TestServerDryRun shows the same check refuses broken
// objects.)
func TestPlatformManifestsServerDryRun(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "examples", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := kubetest.StartPlatform(t)
	manifests := readPlatformManifests(t, string(example), true)
	keys := make([]string, 0, len(manifests))
	for k := range manifests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var objs []*unstructured.Unstructured
	for _, k := range keys {
		o, err := kubetest.Objects([]byte(manifests[k]))
		if err != nil || len(o) != 1 {
			t.Fatalf("%s: %d objects, %v; want one JSON object", k, len(o), err)
		}
		objs = append(objs, o[0])
	}
	seen := map[string]bool{}
	for i, err := range env.DryRun(t, objs) {
		if err != nil {
			t.Errorf("%s refused: %v", keys[i], err)
			continue
		}
		seen[objs[i].GetKind()] = true
	}
	for _, k := range []string{"Namespace", "Deployment", "NodePool", "EC2NodeClass", "ScaledObject", "ServiceMonitor", "PodMonitor", "PrometheusRule"} {
		if !seen[k] {
			t.Errorf("no %s accepted among %d objects: the dry run did not cover the platform", k, len(objs))
		}
	}
}
