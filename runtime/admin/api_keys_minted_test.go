package admin

import (
	"context"
	"net/http"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/credential"
)

// TestClientMintedKeys: a key created or rotated with a secret the client
// minted answers without a secret, authenticates with that secret, and the
// secret it replaced stops working; a malformed or reused secret is
// refused naming the field.
func TestClientMintedKeys(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			c := h.client
			team := h.team(t, "minted")
			mint := func() string {
				k, err := credential.GenerateKey()
				if err != nil {
					t.Fatal(err)
				}
				return k.Secret
			}
			first := mint()
			created, err := c.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team, Name: "wo", RPM: 5, Key: first}, "minted-1")
			if err != nil {
				t.Fatal(err)
			}
			if created.Secret != "" || created.Prefix != first[:12] {
				t.Errorf("create answered secret %q, prefix %q; want no secret and the minted one's prefix", created.Secret, created.Prefix)
			}
			if p, err := h.authn.Authenticate(ctx, "Bearer "+first); err != nil || p.KeyID != created.ID {
				t.Fatalf("the minted secret does not authenticate: %+v, %v", p, err)
			}
			replay, err := c.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team, Name: "wo", RPM: 5, Key: first}, "minted-1")
			if err != nil || replay.ID != created.ID || !replay.Replayed {
				t.Errorf("replay = %+v, %v; want the same key, replayed", replay, err)
			}

			second := mint()
			rotated, err := c.RotateKeyTo(ctx, created.ID, second)
			if err != nil || rotated.ID != created.ID || rotated.Secret != "" || rotated.Prefix != second[:12] {
				t.Fatalf("rotate to a minted secret = %+v, %v", rotated, err)
			}
			if p, err := h.authn.Authenticate(ctx, "Bearer "+second); err != nil || p.KeyID != created.ID {
				t.Errorf("the new secret does not authenticate: %+v, %v", p, err)
			}
			if _, err := h.authn.Authenticate(ctx, "Bearer "+first); err == nil {
				t.Error("the replaced secret still authenticates")
			}

			_, err = c.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team, Key: second}, "")
			wantAPIError(t, "a secret in use", err, http.StatusConflict, "key")
			_, err = c.RotateKeyTo(ctx, created.ID, second)
			wantAPIError(t, "rotating to the secret it has", err, http.StatusConflict, "key")
			_, err = c.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team, Key: "llp_short"}, "")
			wantAPIError(t, "a malformed secret", err, http.StatusBadRequest, "key")
			_, err = c.RotateKeyTo(ctx, created.ID, "sk-not-ours")
			wantAPIError(t, "rotating to a malformed secret", err, http.StatusBadRequest, "key")
			// A rotation without a body still generates the secret.
			gen, err := c.RotateKey(ctx, created.ID)
			if err != nil || !credential.LooksLikeKey(gen.Secret) {
				t.Errorf("a plain rotation = %+v, %v; want a generated secret", gen, err)
			}
		})
	}
}
