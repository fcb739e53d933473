package admin

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// TestNodeDeclarationAPI: a declaration is stored, read back whole (so an
// import can rebuild the agent's command line), shown with its node in
// /admin/nodes (labels, the declared GPU count beside the registered one),
// replaced by a second PUT, refused when out of bounds, and deleted.
func TestNodeDeclarationAPI(t *testing.T) {
	ctx := context.Background()
	gpus := int64(2)
	spec := adminwire.NodeDeclarationSpec{
		OrchestratorURL: "wss://orch.example.com/v1/nodes/connect",
		EngineURL:       "http://127.0.0.1:8001",
		Models: []adminwire.NodeDeclaredModel{{Name: "llama-8b", ServedName: "meta-llama/Llama-3.1-8B-Instruct",
			MaxNumSeqs: 32, MaxModelLen: 8192, KVCacheTokens: 200000}},
		GPUCount: &gpus,
		Labels:   map[string]string{"site": "basement", "rack": "r1"},
	}
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			c := h.client
			_, err := c.GetNodeDeclaration(ctx, "fra-gpu-07")
			wantAPIError(t, "get before any declaration", err, http.StatusNotFound, "id")

			put, err := c.PutNodeDeclaration(ctx, "fra-gpu-07", spec)
			if err != nil || put.NodeID != "fra-gpu-07" || !reflect.DeepEqual(put.NodeDeclarationSpec, spec) {
				t.Fatalf("PutNodeDeclaration = %+v, %v", put, err)
			}
			got, err := c.GetNodeDeclaration(ctx, "fra-gpu-07")
			if err != nil || !reflect.DeepEqual(got.NodeDeclarationSpec, spec) {
				t.Errorf("GetNodeDeclaration = %+v, %v; want %+v", got, err, spec)
			}

			registerNode(t, h, "fra-gpu-07", "onprem", 1, `["llama-8b"]`)
			registerNode(t, h, "vllm-8b-0", "cloud", 1, `["llama-8b"]`)
			list, err := c.ListNodes(ctx)
			if err != nil || len(list.Data) != 2 {
				t.Fatalf("ListNodes = %+v, %v", list, err)
			}
			n := list.Data[0]
			if n.Declared == nil || !reflect.DeepEqual(n.Declared.Labels, spec.Labels) || n.Declared.GPUCount == nil ||
				*n.Declared.GPUCount != 2 || n.GPUs != 1 {
				t.Errorf("listed node %+v declared %+v; want labels %v and gpu_count 2 beside gpus 1", n, n.Declared, spec.Labels)
			}
			if list.Data[1].Declared != nil {
				t.Errorf("an undeclared node shows a declaration %+v", list.Data[1].Declared)
			}
			one, err := c.GetNode(ctx, "fra-gpu-07")
			if err != nil || one.Declared == nil || one.Declared.Labels["site"] != "basement" {
				t.Errorf("GetNode = %+v, %v; want its declaration", one, err)
			}

			bare := spec
			bare.GPUCount, bare.Labels, bare.EngineURL = nil, nil, ""
			if _, err := c.PutNodeDeclaration(ctx, "fra-gpu-07", bare); err != nil {
				t.Fatalf("replace the declaration: %v", err)
			}
			got, err = c.GetNodeDeclaration(ctx, "fra-gpu-07")
			if err != nil || got.GPUCount != nil || got.Labels != nil || got.EngineURL != "" {
				t.Errorf("replaced declaration = %+v, %v; want no gpu_count, labels or engine_url", got, err)
			}

			for _, tc := range []struct {
				name, param string
				edit        func(*adminwire.NodeDeclarationSpec)
			}{
				{"no orchestrator", "orchestrator_url", func(s *adminwire.NodeDeclarationSpec) { s.OrchestratorURL = "" }},
				{"no models", "models", func(s *adminwire.NodeDeclarationSpec) { s.Models = nil }},
				{"zero gpus", "gpu_count", func(s *adminwire.NodeDeclarationSpec) { z := int64(0); s.GPUCount = &z }},
				{"control character in a label", "labels", func(s *adminwire.NodeDeclarationSpec) { s.Labels = map[string]string{"a": "b\n"} }},
				{"bad model name", "models[0].name", func(s *adminwire.NodeDeclarationSpec) {
					s.Models = []adminwire.NodeDeclaredModel{{Name: "a b", ServedName: "x", MaxNumSeqs: 1, MaxModelLen: 1, KVCacheTokens: 1}}
				}},
			} {
				bad := spec
				tc.edit(&bad)
				_, err := c.PutNodeDeclaration(ctx, "fra-gpu-07", bad)
				wantAPIError(t, tc.name, err, http.StatusBadRequest, tc.param)
			}

			for range 2 {
				if err := c.DeleteNodeDeclaration(ctx, "fra-gpu-07"); err != nil {
					t.Errorf("DeleteNodeDeclaration = %v; want nil, also when repeated", err)
				}
			}
			_, err = c.GetNodeDeclaration(ctx, "fra-gpu-07")
			wantAPIError(t, "get after delete", err, http.StatusNotFound, "id")
		})
	}
}
