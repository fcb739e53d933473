package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/credential"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// registerNode inserts a nodes row as the orchestrator would.
func registerNode(t *testing.T, h *harness, id, location string, gpus int, models string) {
	t.Helper()
	_, err := h.db.ExecContext(context.Background(), `INSERT INTO nodes (id, location, gpus, gpu_model, models, last_seen, state, created_at)
		VALUES ($1, $2, $3, 'NVIDIA L40S', $4, $5, 'active', $5)`, id, location, gpus, models, h.clock.Now())
	if err != nil {
		t.Fatalf("register node %s: %v", id, err)
	}
}

func TestNodesAPI(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			c := h.client
			registerNode(t, h, "fra-gpu-07", "onprem", 8, `["llama-8b"]`)
			registerNode(t, h, "vllm-8b-0", "cloud", 1, `["llama-8b"]`)
			beat := h.clock.Now().Add(-2 * time.Second)
			live := adminwire.NodeLive{Healthy: true, QueueDepth: 3, Running: 28, KVCacheUsage: 0.62, GPUUtil: 0.91, Owner: "orch-1", BeatAt: beat}
			h.nodes.set(map[string]adminwire.NodeLive{"fra-gpu-07": live}, nil)
			list, err := c.ListNodes(ctx)
			if err != nil || len(list.Data) != 2 || list.LiveUnavailable {
				t.Fatalf("ListNodes = %+v, %v", list, err)
			}
			n := list.Data[0]
			if n.ID != "fra-gpu-07" || n.Location != "onprem" || n.GPUs != 8 || n.State != "active" || n.LastSeen == nil ||
				n.Live == nil || !reflect.DeepEqual(*n.Live, live) {
				t.Errorf("node with live state = %+v (live %+v)", n, n.Live)
			}
			var models []string
			if err := json.Unmarshal(n.Models, &models); err != nil || !slices.Equal(models, []string{"llama-8b"}) {
				t.Errorf("models = %s, %v", n.Models, err)
			}
			if list.Data[1].Live != nil {
				t.Errorf("a node without heartbeat has live state %+v", list.Data[1].Live)
			}
			h.nodes.set(nil, errors.New("redis down"))
			list, err = c.ListNodes(ctx)
			if err != nil || !list.LiveUnavailable || len(list.Data) != 2 || list.Data[0].Live != nil {
				t.Errorf("ListNodes with the live view down = %+v, %v; want the nodes, flagged", list, err)
			}
			got, err := c.GetNode(ctx, "vllm-8b-0")
			if err != nil || got.Location != "cloud" {
				t.Errorf("GetNode = %+v, %v", got, err)
			}
			_, err = c.GetNode(ctx, "nope")
			wantAPIError(t, "get an unregistered node", err, http.StatusNotFound, "id")

			d, err := c.DrainNode(ctx, "fra-gpu-07")
			if err != nil || d != (adminwire.DrainResult{NodeID: "fra-gpu-07", State: "draining"}) || !slices.Equal(h.drainer.Drained(), []string{"fra-gpu-07"}) {
				t.Errorf("DrainNode = %+v, %v; drained %v", d, err, h.drainer.Drained())
			}
			_, err = c.DrainNode(ctx, "nope")
			wantAPIError(t, "drain an unregistered node", err, http.StatusNotFound, "id")
		})
	}
}

func TestDrainWithoutOrchestratorIs501(t *testing.T) {
	h := newHarness(t, testenv.Postgres(t), harnessOptions{noDrainer: true, noNodeView: true})
	registerNode(t, h, "fra-gpu-07", "onprem", 8, `[]`)
	_, err := h.client.DrainNode(context.Background(), "fra-gpu-07")
	ae := apiError(t, err)
	if ae.Status != http.StatusNotImplemented || ae.Code != codeNotImplemented || ae.Type != "server_error" {
		t.Errorf("drain without a drainer = %+v; want 501 not_implemented", ae)
	}
	list, err := h.client.ListNodes(context.Background())
	if err != nil || len(list.Data) != 1 || list.Data[0].Live != nil || list.LiveUnavailable {
		t.Errorf("ListNodes without a node view = %+v, %v; want the node without live state", list, err)
	}
}

func TestNodeTokensAPI(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			c := h.client
			issued, err := c.IssueNodeToken(ctx, "fra-gpu-07", "tf-node-1")
			if err != nil || !credential.LooksLikeNodeToken(issued.Token) || issued.NodeID != "fra-gpu-07" || issued.Replayed {
				t.Fatalf("IssueNodeToken = %+v, %v", issued.NodeToken, err)
			}
			if err := h.tokens.Verify(ctx, "fra-gpu-07", issued.Token); err != nil {
				t.Errorf("Verify(issued) = %v", err)
			}
			replay, err := c.IssueNodeToken(ctx, "fra-gpu-07", "tf-node-1")
			if err != nil || replay.ID != issued.ID || replay.Token != "" || !replay.Replayed || replay.SecretNote == "" {
				t.Errorf("replayed IssueNodeToken = %+v, %v; want token %d without its secret", replay, err, issued.ID)
			}
			status, body, _ := h.raw(t, http.MethodGet, "/admin/nodes/fra-gpu-07/tokens", "", nil)
			if status != http.StatusOK {
				t.Fatalf("list tokens = %d", status)
			}
			assertNoSecret(t, "token list", body, issued.Token)
			list, err := c.ListNodeTokens(ctx, "fra-gpu-07")
			if err != nil || len(list) != 1 || list[0] != issued.NodeToken {
				t.Errorf("ListNodeTokens = %+v, %v; want [%+v]", list, err, issued.NodeToken)
			}
			revoked, err := c.RevokeNodeToken(ctx, issued.ID)
			if err != nil || revoked.RevokedAt == nil {
				t.Fatalf("RevokeNodeToken = %+v, %v", revoked, err)
			}
			if err := h.tokens.Verify(ctx, "fra-gpu-07", issued.Token); !errors.Is(err, ErrNodeTokenRevoked) {
				t.Errorf("Verify(revoked) = %v, want ErrNodeTokenRevoked", err)
			}
			if _, err := c.RevokeNodeToken(ctx, issued.ID); err != nil {
				t.Errorf("second revoke: %v", err)
			}
			want := []string{"fra-gpu-07/" + itoa(issued.ID), "fra-gpu-07/" + itoa(issued.ID)}
			if got := h.nodeRevoker.Calls(); !slices.Equal(got, want) {
				t.Errorf("node token revoker calls = %v, want %v", got, want)
			}
			_, err = c.RevokeNodeToken(ctx, 999)
			wantAPIError(t, "revoke a missing token", err, http.StatusNotFound, "token_id")
			assertNoSecret(t, "logs", h.logs.String(), issued.Token)
		})
	}
}
