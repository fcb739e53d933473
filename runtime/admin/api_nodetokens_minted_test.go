package admin

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/credential"
)

// TestClientMintedNodeTokens: a node token issued with a token the client
// minted answers without it, verifies for its node, and a replay of the
// same request (a lost answer retried) is the same token, still usable; a
// malformed, weak or reused token is refused naming the field.
func TestClientMintedNodeTokens(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			c := h.client
			mint := func() string {
				tok, _, err := credential.GenerateNodeToken()
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}
			minted := mint()
			issued, err := c.IssueNodeTokenTo(ctx, "fra-gpu-08", minted, "minted-node-1")
			if err != nil || issued.Token != "" || issued.NodeID != "fra-gpu-08" || issued.Replayed {
				t.Fatalf("IssueNodeTokenTo = %+v, %v; want a new token without its secret", issued, err)
			}
			if err := h.tokens.Verify(ctx, "fra-gpu-08", minted); err != nil {
				t.Errorf("Verify(minted) = %v", err)
			}
			replay, err := c.IssueNodeTokenTo(ctx, "fra-gpu-08", minted, "minted-node-1")
			if err != nil || replay.ID != issued.ID || !replay.Replayed {
				t.Errorf("replay = %+v, %v; want token %d, replayed", replay, err, issued.ID)
			}
			if err := h.tokens.Verify(ctx, "fra-gpu-08", minted); err != nil {
				t.Errorf("Verify(minted) after the replay = %v", err)
			}
			_, err = c.IssueNodeTokenTo(ctx, "fra-gpu-08", mint(), "minted-node-1")
			wantAPIError(t, "another token under the same Idempotency-Key", err, http.StatusConflict, adminwire.IdempotencyHeader)
			_, err = c.IssueNodeTokenTo(ctx, "fra-gpu-09", minted, "")
			wantAPIError(t, "a token already issued", err, http.StatusConflict, "token")
			for name, bad := range map[string]string{
				"short":          credential.NodeTokenPrefix + "abc",
				"not base62":     credential.NodeTokenPrefix + strings.Repeat("-", len(minted)-len(credential.NodeTokenPrefix)),
				"an api key":     "llp_" + strings.Repeat("a", len(minted)-len(credential.NodeTokenPrefix)),
				"no prefix":      strings.Repeat("a", len(credential.NodeTokenPrefix)+len(minted)-len(credential.NodeTokenPrefix)),
				"trailing space": minted[:len(minted)-1] + " ",
			} {
				_, err = c.IssueNodeTokenTo(ctx, "fra-gpu-09", bad, "")
				wantAPIError(t, name, err, http.StatusBadRequest, "token")
			}
			assertNoSecret(t, "logs", h.logs.String(), minted)
		})
	}
}
