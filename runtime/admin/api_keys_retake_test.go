package admin

import (
	"context"
	"net/http"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/credential"
)

// TestRepeatedKeyCreateTakesOverALostKey: a create is repeated under the
// same Idempotency-Key by a client that lost the first answer's secret (a
// process killed after the commit) and mints another. The repeat takes the
// key over: the same id, rotated to the new secret, the lost one refused,
// no second key. A repeat with the same secret is a plain replay; one that
// differs in more than the secret is a conflict; once the client says it
// kept the key (ForgetKeyCreate), the same Idempotency-Key makes a new
// key, and so it does when the key it made was revoked since (with other
// limits too).
func TestRepeatedKeyCreateTakesOverALostKey(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			c := h.client
			team := h.team(t, "retake")
			mint := func() string {
				k, err := credential.GenerateKey()
				if err != nil {
					t.Fatal(err)
				}
				return k.Secret
			}
			authenticates := func(secret string) (int64, bool) {
				p, err := h.authn.Authenticate(ctx, "Bearer "+secret)
				return p.KeyID, err == nil
			}
			create := func(secret string, rpm int) (adminwire.CreatedKey, error) {
				return c.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team, Name: "ci", RPM: rpm, Key: secret}, "tf-ci")
			}
			lost := mint()
			first, err := create(lost, 5)
			if err != nil {
				t.Fatal(err)
			}
			if id, ok := authenticates(lost); !ok || id != first.ID {
				t.Fatalf("the first secret authenticates as key %d (%v), want %d", id, ok, first.ID)
			}

			retry, err := create(lost, 5)
			if err != nil || retry.ID != first.ID || !retry.Replayed || retry.Rotated || retry.Prefix != lost[:12] {
				t.Errorf("a retry with the same secret = %+v, %v; want key %d replayed, not rotated", retry, err, first.ID)
			}

			kept := mint()
			retaken, err := create(kept, 5)
			if err != nil || retaken.ID != first.ID || !retaken.Replayed || !retaken.Rotated || retaken.Secret != "" || retaken.Prefix != kept[:12] {
				t.Fatalf("a repeat with another secret = %+v, %v; want key %d rotated to it", retaken, err, first.ID)
			}
			if id, ok := authenticates(kept); !ok || id != first.ID {
				t.Errorf("the repeat's secret authenticates as key %d (%v), want %d", id, ok, first.ID)
			}
			if _, ok := authenticates(lost); ok {
				t.Error("the lost secret still authenticates after the key was taken over")
			}
			if active := activeKeys(t, h, team); len(active) != 1 || active[0] != first.ID {
				t.Errorf("active keys of the team = %v, want only %d", active, first.ID)
			}

			_, err = create(mint(), 6)
			wantAPIError(t, "a repeat with other limits", err, http.StatusConflict, adminwire.IdempotencyHeader)

			if _, err := c.ForgetKeyCreate(ctx, first.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := c.ForgetKeyCreate(ctx, first.ID); err != nil {
				t.Errorf("forgetting again: %v", err)
			}
			second, err := create(mint(), 5)
			if err != nil || second.ID == first.ID || second.Replayed {
				t.Errorf("a create after the client kept the key = %+v, %v; want a new key", second, err)
			}
			if id, ok := authenticates(kept); !ok || id != first.ID {
				t.Errorf("the kept key's secret authenticates as key %d (%v) after another create, want %d", id, ok, first.ID)
			}

			if _, err := c.RevokeKey(ctx, second.ID); err != nil {
				t.Fatal(err)
			}
			fresh := mint()
			third, err := create(fresh, 5)
			if err != nil || third.ID == second.ID || third.ID == first.ID || third.Replayed {
				t.Errorf("a repeat after the key was revoked = %+v, %v; want a new key", third, err)
			}
			if id, ok := authenticates(fresh); !ok || id != third.ID {
				t.Errorf("the new key's secret authenticates as key %d (%v), want %d", id, ok, third.ID)
			}
			again, err := create(mint(), 5)
			if err != nil || again.ID != third.ID || !again.Rotated {
				t.Errorf("a repeat after that = %+v, %v; want key %d taken over", again, err, third.ID)
			}

			if _, err := c.RevokeKey(ctx, third.ID); err != nil {
				t.Fatal(err)
			}
			changed, err := create(mint(), 7)
			if err != nil || changed.ID == third.ID || changed.RPM != 7 || changed.Replayed {
				t.Errorf("a repeat with other limits after the key was revoked = %+v, %v; want a new key with them", changed, err)
			}

			_, err = c.ForgetKeyCreate(ctx, 999)
			wantAPIError(t, "forgetting a missing key", err, http.StatusNotFound, "id")
		})
	}
}

// activeKeys lists the ids of the team's keys that are not revoked.
func activeKeys(t *testing.T, h *harness, team int64) []int64 {
	t.Helper()
	keys, err := h.client.ListKeys(context.Background(), team)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, k := range keys {
		if k.RevokedAt == nil {
			ids = append(ids, k.ID)
		}
	}
	return ids
}
