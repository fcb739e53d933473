package admin

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

func TestModelsAPI(t *testing.T) {
	ctx := context.Background()
	spec := adminwire.ModelSpec{ServedName: "meta-llama/Llama-3.1-8B-Instruct", PromptPriceMicroPerMTok: 100_000,
		CompletionPriceMicroPerMTok: 400_000, MaxContextTokens: 8192, MaxOutputTokens: 4096}
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			c := h.client
			m, created, err := c.PutModel(ctx, "llama-8b", spec)
			if err != nil || !created || m.Name != "llama-8b" || m.ModelSpec != spec {
				t.Fatalf("PutModel = %+v, created %v, %v", m, created, err)
			}
			h.clock.Step(time.Minute)
			same, created, err := c.PutModel(ctx, "llama-8b", spec)
			if err != nil || created || same != m {
				t.Errorf("repeated PutModel = %+v, created %v, %v; want %+v unchanged with 200", same, created, err, m)
			}
			changed := spec
			changed.PromptPriceMicroPerMTok = 0 // a free model is allowed
			upd, created, err := c.PutModel(ctx, "llama-8b", changed)
			if err != nil || created || upd.PromptPriceMicroPerMTok != 0 || !upd.UpdatedAt.After(m.UpdatedAt) {
				t.Errorf("changing PutModel = %+v, created %v, %v", upd, created, err)
			}
			if _, _, err := c.PutModel(ctx, "qwen-32b", spec); err != nil {
				t.Fatal(err)
			}
			list, err := c.ListModels(ctx)
			if err != nil || len(list) != 2 || list[0].Name != "llama-8b" || list[1].Name != "qwen-32b" {
				t.Errorf("ListModels = %+v, %v", list, err)
			}
			got, err := c.GetModel(ctx, "llama-8b")
			if err != nil || got != upd {
				t.Errorf("GetModel = %+v, %v; want %+v", got, err, upd)
			}
			if err := c.DeleteModel(ctx, "llama-8b"); err != nil {
				t.Fatalf("DeleteModel: %v", err)
			}
			_, err = c.GetModel(ctx, "llama-8b")
			wantAPIError(t, "get a deleted model", err, http.StatusNotFound, "name")
			wantAPIError(t, "delete a deleted model", c.DeleteModel(ctx, "llama-8b"), http.StatusNotFound, "name")
			bad := spec
			bad.MaxOutputTokens = 9000
			_, _, err = c.PutModel(ctx, "llama-8b", bad)
			wantAPIError(t, "output above context", err, http.StatusBadRequest, "max_output_tokens")
			_, _, err = c.PutModel(ctx, "bad name", spec)
			wantAPIError(t, "model name with a space", err, http.StatusBadRequest, "name")
		})
	}
}
