package admin

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/credential"
)

func TestKeyLifecycleAPI(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			c := h.client
			team := h.team(t, "search")
			expires := h.clock.Now().Add(30 * 24 * time.Hour)
			req := adminwire.CreateKeyRequest{TeamID: team, Name: "ci", ModelAllowlist: []string{"llama-8b"}, RPM: 600,
				TokensPerDay: 2_000_000, MaxStreams: 4, MaxTokens: 2048, ExpiresAt: &expires}
			created, err := c.CreateKey(ctx, req, "tf-create-1")
			if err != nil {
				t.Fatalf("CreateKey: %v", err)
			}
			if !credential.LooksLikeKey(created.Secret) || created.Prefix != created.Secret[:12] || created.Status != adminwire.KeyActive || created.Replayed {
				t.Fatalf("CreateKey = %+v; want a fresh active key with its secret", created.Key)
			}
			rec, err := h.store.LookupKey(ctx, credential.HashKey(created.Secret))
			wantLimits := auth.Limits{ModelAllowlist: []string{"llama-8b"}, RPM: 600, TokensPerDay: 2_000_000, MaxStreams: 4, MaxTokens: 2048}
			if err != nil || rec.ID != created.ID || rec.TeamID != team || !reflect.DeepEqual(rec.Limits, wantLimits) || !rec.ExpiresAt.Equal(expires) {
				t.Errorf("LookupKey(created) = %+v, %v; want id %d, limits %+v, expiry %v", rec, err, created.ID, wantLimits, expires)
			}
			p, err := h.authn.Authenticate(ctx, "Bearer "+created.Secret)
			if err != nil || p.KeyID != created.ID || p.IsAdmin() {
				t.Fatalf("authenticate with the new key = %+v, %v", p, err)
			}

			t.Run("replay with the same Idempotency-Key", func(t *testing.T) {
				replay, err := c.CreateKey(ctx, req, "tf-create-1")
				if err != nil || replay.ID != created.ID || replay.Secret != "" || !replay.Replayed || replay.SecretNote != adminwire.SecretNote {
					t.Errorf("replay = %+v, %v; want key %d, no secret, replayed with a note", replay, err, created.ID)
				}
				other := req
				other.RPM = 1
				_, err = c.CreateKey(ctx, other, "tf-create-1")
				wantAPIError(t, "same Idempotency-Key, other body", err, http.StatusConflict, adminwire.IdempotencyHeader)
				keys, err := c.ListKeys(ctx, team)
				if err != nil || len(keys) != 1 {
					t.Errorf("keys after replays = %d, %v; want 1", len(keys), err)
				}
			})

			t.Run("get and list never show a secret or hash", func(t *testing.T) {
				got, err := c.GetKey(ctx, created.ID)
				if err != nil || !reflect.DeepEqual(got, created.Key) {
					t.Errorf("GetKey = %+v, %v; want %+v", got, err, created.Key)
				}
				hash := credential.HashKey(created.Secret)
				for _, path := range []string{"/admin/keys", "/admin/keys?team_id=" + itoa(team), "/admin/keys/" + itoa(created.ID)} {
					status, body, _ := h.raw(t, http.MethodGet, path, "", nil)
					if status != http.StatusOK {
						t.Fatalf("GET %s = %d", path, status)
					}
					assertNoSecret(t, "GET "+path, body, created.Secret)
					for _, enc := range []string{hex.EncodeToString(hash), base64.StdEncoding.EncodeToString(hash)} {
						assertNoSecret(t, "GET "+path+" (hash)", body, "x_"+enc)
					}
				}
				_, err = c.ListKeys(ctx, 999)
				wantAPIError(t, "list keys of a missing team", err, http.StatusNotFound, "team_id")
			})

			t.Run("patch changes limits and evicts the cached key", func(t *testing.T) {
				rpm, streams := 0, 1
				allow := []string{}
				upd, err := c.UpdateKey(ctx, created.ID, adminwire.UpdateKeyRequest{RPM: &rpm, MaxStreams: &streams, ModelAllowlist: &allow, ExpiresAt: adminwire.ClearTime()})
				if err != nil || upd.RPM != 0 || upd.MaxStreams != 1 || len(upd.ModelAllowlist) != 0 || upd.ExpiresAt != nil ||
					upd.TokensPerDay != 2_000_000 || upd.MaxTokens != 2048 {
					t.Fatalf("UpdateKey = %+v, %v", upd, err)
				}
				p, err := h.authn.Authenticate(ctx, "Bearer "+created.Secret)
				want := auth.Limits{ModelAllowlist: []string{}, TokensPerDay: 2_000_000, MaxStreams: 1, MaxTokens: 2048}
				if err != nil || !reflect.DeepEqual(p.Limits, want) || !p.ExpiresAt.IsZero() {
					t.Errorf("limits seen by the gateway after patch = %+v (expires %v), %v; want %+v", p.Limits, p.ExpiresAt, err, want)
				}
				name := "ci-renamed"
				upd, err = c.UpdateKey(ctx, created.ID, adminwire.UpdateKeyRequest{Name: &name})
				if err != nil || upd.Name != name || upd.MaxStreams != 1 {
					t.Errorf("name-only patch = %+v, %v; want other fields kept", upd, err)
				}
			})

			t.Run("patch max_tokens: absent keeps, a value sets, 0 removes", func(t *testing.T) {
				for _, step := range []struct {
					name, body string
					want       int
				}{
					{"set", `{"max_tokens":512}`, 512},
					{"absent", `{"rpm":30}`, 512},
					{"null is absent", `{"max_tokens":null}`, 512},
					{"zero removes", `{"max_tokens":0}`, 0},
					{"set again", `{"max_tokens":2048}`, 2048},
				} {
					status, body, _ := h.raw(t, http.MethodPatch, "/admin/keys/"+itoa(created.ID), step.body, nil)
					var got map[string]any
					if err := json.Unmarshal([]byte(body), &got); err != nil || status != http.StatusOK {
						t.Fatalf("%s: PATCH %s = %d %s", step.name, step.body, status, body)
					}
					if got["max_tokens"] != float64(step.want) {
						t.Errorf("%s: PATCH %s answered max_tokens %v, want %d", step.name, step.body, got["max_tokens"], step.want)
					}
					read, err := c.GetKey(ctx, created.ID)
					if err != nil || read.MaxTokens != step.want {
						t.Errorf("%s: GET after PATCH %s = max_tokens %d, %v; want %d", step.name, step.body, read.MaxTokens, err, step.want)
					}
					p, err := h.authn.Authenticate(ctx, "Bearer "+created.Secret)
					if err != nil || p.Limits.MaxTokens != step.want {
						t.Errorf("%s: the gateway's limits after PATCH %s = %+v, %v; want max_tokens %d", step.name, step.body, p.Limits, err, step.want)
					}
					// No cap is stored as NULL, as every limit's 0.
					var stored sql.NullInt64
					err = h.db.QueryRowContext(ctx, "SELECT max_tokens FROM api_keys WHERE id = $1", created.ID).Scan(&stored)
					if err != nil || stored.Valid != (step.want != 0) || stored.Int64 != int64(step.want) {
						t.Errorf("%s: stored max_tokens = %+v, %v; want %d (NULL for 0)", step.name, stored, err, step.want)
					}
				}
			})

			t.Run("rotate", func(t *testing.T) {
				before := len(h.revoker.Calls())
				rotated, err := c.RotateKey(ctx, created.ID)
				if err != nil || rotated.ID != created.ID || !credential.LooksLikeKey(rotated.Secret) || rotated.Secret == created.Secret || rotated.MaxStreams != 1 {
					t.Fatalf("RotateKey = %+v, %v", rotated, err)
				}
				if _, err := h.store.LookupKey(ctx, credential.HashKey(created.Secret)); !errors.Is(err, auth.ErrKeyNotFound) {
					t.Errorf("old hash after rotate: error = %v, want ErrKeyNotFound", err)
				}
				if _, err := h.authn.Authenticate(ctx, "Bearer "+created.Secret); !errors.Is(err, auth.ErrInvalidCredential) {
					t.Errorf("gateway with the old secret after rotate: error = %v, want ErrInvalidCredential at once", err)
				}
				rec, err := h.store.LookupKey(ctx, credential.HashKey(rotated.Secret))
				if err != nil || rec.ID != created.ID || rec.Limits.MaxStreams != 1 {
					t.Errorf("new hash after rotate = %+v, %v", rec, err)
				}
				calls := h.revoker.Calls()[before:]
				if len(calls) != 1 || calls[0].id != created.ID || !credential.EqualHash(calls[0].hash, credential.HashKey(rotated.Secret)) {
					t.Errorf("revoker calls on rotate = %+v; want one for key %d, made after the new hash committed", calls, created.ID)
				}
				created.Secret = rotated.Secret
			})

			t.Run("revoke", func(t *testing.T) {
				if _, err := h.authn.Authenticate(ctx, "Bearer "+created.Secret); err != nil {
					t.Fatalf("key unusable before revoke: %v", err)
				}
				before := len(h.revoker.Calls())
				revoked, err := c.RevokeKey(ctx, created.ID)
				if err != nil || revoked.RevokedAt == nil || revoked.Status != adminwire.KeyRevoked {
					t.Fatalf("RevokeKey = %+v, %v", revoked, err)
				}
				calls := h.revoker.Calls()[before:]
				if len(calls) != 1 || calls[0].id != created.ID || !calls[0].revoked || calls[0].readError != nil {
					t.Errorf("revoker calls on revoke = %+v; want one for key %d, made after revoked_at committed", calls, created.ID)
				}
				rec, err := h.store.LookupKey(ctx, credential.HashKey(created.Secret))
				if err != nil || rec.RevokedAt.IsZero() {
					t.Errorf("LookupKey after revoke = %+v, %v; want revoked", rec, err)
				}
				// The key cache held the key as valid; the revoker evicted
				// it, so the gateway refuses it with no time passing.
				if _, err := h.authn.Authenticate(ctx, "Bearer "+created.Secret); !errors.Is(err, auth.ErrRevoked) {
					t.Errorf("gateway after revoke: error = %v, want ErrRevoked at once", err)
				}
				again, err := c.RevokeKey(ctx, created.ID)
				if err != nil || !again.RevokedAt.Equal(*revoked.RevokedAt) {
					t.Errorf("second revoke = %+v, %v; want the same revoked_at", again, err)
				}
				_, err = c.RotateKey(ctx, created.ID)
				wantAPIError(t, "rotate a revoked key", err, http.StatusConflict, "")
			})

			t.Run("revocation broadcast failure answers 503 and the retry repairs it", func(t *testing.T) {
				k, err := c.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team}, "")
				if err != nil {
					t.Fatal(err)
				}
				h.revoker.setFail(errors.New("redis down"))
				_, err = c.RevokeKey(ctx, k.ID)
				wantAPIError(t, "revoke with the broadcast down", err, http.StatusServiceUnavailable, "")
				h.revoker.setFail(nil)
				if got, err := c.RevokeKey(ctx, k.ID); err != nil || got.Status != adminwire.KeyRevoked {
					t.Errorf("retried revoke = %+v, %v", got, err)
				}
				calls := h.revoker.Calls()
				if n := len(calls); n < 2 || calls[n-1].id != k.ID || calls[n-2].id != k.ID {
					t.Errorf("revoker calls = %+v; want the failed and the retried broadcast for key %d", calls, k.ID)
				}
			})

			t.Run("missing keys", func(t *testing.T) {
				for name, err := range map[string]error{
					"get":    func() error { _, err := c.GetKey(ctx, 999); return err }(),
					"patch":  func() error { _, err := c.UpdateKey(ctx, 999, adminwire.UpdateKeyRequest{}); return err }(),
					"rotate": func() error { _, err := c.RotateKey(ctx, 999); return err }(),
					"revoke": func() error { _, err := c.RevokeKey(ctx, 999); return err }(),
				} {
					wantAPIError(t, name+" a missing key", err, http.StatusNotFound, "id")
				}
				_, err := c.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: 999}, "")
				wantAPIError(t, "create for a missing team", err, http.StatusNotFound, "team_id")
			})

			t.Run("expiry shows in the status", func(t *testing.T) {
				soon := h.clock.Now().Add(time.Hour)
				k, err := c.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team, ExpiresAt: &soon}, "")
				if err != nil {
					t.Fatal(err)
				}
				h.clock.Step(2 * time.Hour)
				got, err := c.GetKey(ctx, k.ID)
				if err != nil || got.Status != adminwire.KeyExpired {
					t.Errorf("status after expiry = %q, %v; want %q", got.Status, err, adminwire.KeyExpired)
				}
				if _, err := h.authn.Authenticate(ctx, "Bearer "+k.Secret); !errors.Is(err, auth.ErrExpired) {
					t.Errorf("gateway with an expired key: error = %v, want ErrExpired", err)
				}
			})

			t.Run("a user key cannot call the admin api", func(t *testing.T) {
				k, err := c.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team}, "")
				if err != nil {
					t.Fatal(err)
				}
				user, err := adminclient.NewClient(h.url, k.Secret, nil)
				if err != nil {
					t.Fatal(err)
				}
				_, err = user.ListKeys(ctx, 0)
				if ae := apiError(t, err); ae.Status != http.StatusForbidden || ae.Type != "permission_error" {
					t.Errorf("user key on the admin api = %+v; want 403 permission_error", ae)
				}
				logs := h.logs.String()
				for _, s := range []string{k.Secret, created.Secret, h.adminToken} {
					assertNoSecret(t, "logs", logs, s)
				}
				if !strings.Contains(logs, "admin request") {
					t.Errorf("no request was logged; the secret check proves nothing")
				}
			})
		})
	}
}
