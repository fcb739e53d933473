package admin

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/credential"
	"github.com/llmplat/llmplat/runtime/store"
)

func TestLookupKeyContract(t *testing.T) {
	ctx := context.Background()
	expires := t0.Add(48 * time.Hour)
	tests := []struct {
		name       string
		req        adminwire.CreateKeyRequest
		wantLimits auth.Limits
		wantExpiry time.Time
	}{
		{
			name:       "every limit",
			req:        adminwire.CreateKeyRequest{Name: "ci", ModelAllowlist: []string{"llama-8b", "qwen-32b"}, RPM: 600, TokensPerDay: 1_000_000, MaxStreams: 8, MaxTokens: 2048, ExpiresAt: &expires},
			wantLimits: auth.Limits{ModelAllowlist: []string{"llama-8b", "qwen-32b"}, RPM: 600, TokensPerDay: 1_000_000, MaxStreams: 8, MaxTokens: 2048},
			wantExpiry: expires,
		},
		{
			name:       "no limits read as zero and an empty allowlist",
			req:        adminwire.CreateKeyRequest{Name: "open"},
			wantLimits: auth.Limits{ModelAllowlist: []string{}},
		},
		{
			name:       "one limit",
			req:        adminwire.CreateKeyRequest{MaxStreams: 2},
			wantLimits: auth.Limits{ModelAllowlist: []string{}, MaxStreams: 2},
		},
		{
			name:       "max_tokens alone",
			req:        adminwire.CreateKeyRequest{MaxTokens: 512},
			wantLimits: auth.Limits{ModelAllowlist: []string{}, MaxTokens: 512},
		},
	}
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migratedDB(t, dc.dsn(t))
			s := NewSQLStore(db)
			team := mustTeam(t, s, "search")
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					tt.req.TeamID = team
					created, err := s.CreateKey(ctx, tt.req, "", t0)
					if err != nil {
						t.Fatalf("CreateKey: %v", err)
					}
					got, err := s.LookupKey(ctx, credential.HashKey(created.Secret))
					if err != nil {
						t.Fatalf("LookupKey: %v", err)
					}
					want := auth.KeyRecord{ID: created.ID, TeamID: team, TeamName: "search", Prefix: created.Secret[:12],
						Limits: tt.wantLimits, ExpiresAt: tt.wantExpiry}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("LookupKey = %+v, want %+v", got, want)
					}
				})
			}
			t.Run("zero limits are stored as NULL", func(t *testing.T) {
				var nulls int
				err := db.QueryRowContext(ctx, "SELECT count(*) FROM api_keys WHERE rpm IS NULL AND tokens_per_day IS NULL AND max_streams IS NULL AND max_tokens IS NULL").Scan(&nulls)
				if err != nil {
					t.Fatal(err)
				}
				if nulls != 1 {
					t.Errorf("keys without any limit = %d, want 1", nulls)
				}
			})
			t.Run("unknown hash", func(t *testing.T) {
				_, err := s.LookupKey(ctx, credential.HashKey("llp_nope"))
				if !errors.Is(err, auth.ErrKeyNotFound) {
					t.Errorf("LookupKey(unknown) error = %v, want ErrKeyNotFound", err)
				}
			})
		})
	}
}

func TestKeyLifecycleContract(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			s := NewSQLStore(migratedDB(t, dc.dsn(t)))
			team := mustTeam(t, s, "search")
			created, err := s.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team, RPM: 60, ModelAllowlist: []string{"llama-8b"}}, "", t0)
			if err != nil {
				t.Fatal(err)
			}
			rotated, err := s.RotateKey(ctx, created.ID, "")
			if err != nil {
				t.Fatalf("RotateKey: %v", err)
			}
			if rotated.ID != created.ID || rotated.Secret == created.Secret || rotated.RPM != 60 {
				t.Errorf("rotated = id %d rpm %d, secret changed %v; want id %d rpm 60, a new secret",
					rotated.ID, rotated.RPM, rotated.Secret != created.Secret, created.ID)
			}
			if _, err := s.LookupKey(ctx, credential.HashKey(created.Secret)); !errors.Is(err, auth.ErrKeyNotFound) {
				t.Errorf("old secret after rotation: error = %v, want ErrKeyNotFound", err)
			}
			rec, err := s.LookupKey(ctx, credential.HashKey(rotated.Secret))
			if err != nil || rec.ID != created.ID || rec.Limits.RPM != 60 || rec.Prefix != rotated.Secret[:12] {
				t.Errorf("new secret after rotation: %+v, %v", rec, err)
			}
			revokedAt := t0.Add(time.Minute)
			if _, err := s.RevokeKey(ctx, created.ID, revokedAt); err != nil {
				t.Fatalf("RevokeKey: %v", err)
			}
			again, err := s.RevokeKey(ctx, created.ID, revokedAt.Add(time.Hour))
			if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(revokedAt) {
				t.Errorf("second revoke = revoked_at %v, %v; want the first %v kept", again.RevokedAt, err, revokedAt)
			}
			rec, err = s.LookupKey(ctx, credential.HashKey(rotated.Secret))
			if err != nil || !rec.RevokedAt.Equal(revokedAt) {
				t.Errorf("LookupKey after revoke = revoked_at %v, %v; want %v", rec.RevokedAt, err, revokedAt)
			}
			if _, err := s.RotateKey(ctx, created.ID, ""); !errors.Is(err, ErrKeyRevoked) {
				t.Errorf("rotate a revoked key: error = %v, want ErrKeyRevoked", err)
			}
			for name, err := range map[string]error{
				"rotate": func() error { _, err := s.RotateKey(ctx, 999, ""); return err }(),
				"revoke": func() error { _, err := s.RevokeKey(ctx, 999, t0); return err }(),
				"update": func() error { _, err := s.UpdateKey(ctx, 999, adminwire.UpdateKeyRequest{}); return err }(),
				"get":    func() error { _, err := s.GetKey(ctx, 999); return err }(),
			} {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("%s a missing key: error = %v, want ErrNotFound", name, err)
				}
			}
		})
	}
}

func TestCreateKeyIdempotencyContract(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migratedDB(t, dc.dsn(t))
			s := NewSQLStore(db)
			team := mustTeam(t, s, "search")
			req := adminwire.CreateKeyRequest{TeamID: team, Name: "tf", RPM: 10}
			first, err := s.CreateKey(ctx, req, "idem-1", t0)
			if err != nil || first.Secret == "" || first.Replayed {
				t.Fatalf("first create = %+v, %v", first, err)
			}
			replay, err := s.CreateKey(ctx, req, "idem-1", t0.Add(time.Second))
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			if replay.ID != first.ID || replay.Secret != "" || !replay.Replayed || replay.SecretNote == "" {
				t.Errorf("replay = id %d secret %q replayed %v; want id %d, no secret, replayed", replay.ID, replay.Secret, replay.Replayed, first.ID)
			}
			req.RPM = 11
			if _, err := s.CreateKey(ctx, req, "idem-1", t0); !errors.Is(err, ErrIdempotencyConflict) {
				t.Errorf("same key, other request: error = %v, want ErrIdempotencyConflict", err)
			}
			other, err := s.CreateKey(ctx, req, "idem-2", t0)
			if err != nil || other.ID == first.ID {
				t.Errorf("other idempotency key = id %d, %v; want a new key", other.ID, err)
			}
			if _, err := s.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: 999}, "idem-3", t0); !errors.Is(err, ErrTeamNotFound) {
				t.Errorf("create for a missing team: error = %v, want ErrTeamNotFound", err)
			}
		})
	}
}

func TestConcurrentIdempotentCreatesMakeOneKey(t *testing.T) {
	const callers = 8 // a retry storm from several provider goroutines
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migratedDB(t, dc.dsn(t))
			s := NewSQLStore(db)
			team := mustTeam(t, s, "search")
			warmPool(t, db, callers)
			results := make([]adminwire.CreatedKey, callers)
			errs := make([]error, callers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					<-start
					results[i], errs[i] = s.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team}, "same", t0)
				})
			}
			close(start)
			wg.Wait()
			secrets := 0
			for i, r := range results {
				if errs[i] != nil {
					t.Fatalf("caller %d: %v", i, errs[i])
				}
				if r.ID != results[0].ID {
					t.Errorf("caller %d got key %d, caller 0 got %d", i, r.ID, results[0].ID)
				}
				if r.Secret != "" {
					secrets++
				}
			}
			var rows int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM api_keys").Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != 1 || secrets != 1 {
				t.Errorf("rows = %d, answers with a secret = %d; want 1 and 1", rows, secrets)
			}
		})
	}
}

func warmPool(t *testing.T, db *store.DB, n int) {
	t.Helper()
	db.SetMaxIdleConns(n)
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	for _, c := range conns {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
