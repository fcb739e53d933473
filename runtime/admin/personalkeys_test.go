package admin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminrules"
	"github.com/llmplat/llmplat/runtime/adminwire"
)

// TestPersonalKeysContract: a team starts with self-service off and the
// default longest life; a personal key is refused while it is off and past
// the longest life, made with origin console and its maker once on; only
// its own team revokes it, a managed key never, and the revoker is kept.
func TestPersonalKeysContract(t *testing.T) {
	ctx := context.Background()
	day := 24 * time.Hour
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			s := NewSQLStore(migratedDB(t, dc.dsn(t)))
			team, other := mustTeam(t, s, "search"), mustTeam(t, s, "ads")
			tm, err := s.GetTeam(ctx, team)
			if err != nil || tm.SelfServiceKeys || tm.PersonalKeyMaxDays != adminrules.DefaultPersonalKeyDays {
				t.Fatalf("a new team: %+v %v, want self-service off and %d days", tm, err, adminrules.DefaultPersonalKeyDays)
			}
			in30 := t0.Add(30 * day)
			req := adminwire.CreateKeyRequest{TeamID: team, Name: "notebook", ModelAllowlist: []string{"llama-8b"}, RPM: 10, ExpiresAt: &in30}
			if _, err := s.CreatePersonalKey(ctx, req, "llp_maker", t0); !errors.Is(err, ErrSelfServiceOff) {
				t.Fatalf("create with self-service off: %v, want ErrSelfServiceOff", err)
			}
			on, days := true, 20
			if tm, err = s.SetSelfService(ctx, team, &on, &days); err != nil || !tm.SelfServiceKeys || tm.PersonalKeyMaxDays != 20 {
				t.Fatalf("SetSelfService: %+v %v", tm, err)
			}
			if _, err := s.CreatePersonalKey(ctx, req, "llp_maker", t0); !errors.Is(err, ErrExpiryTooLong) {
				t.Fatalf("create 30 days out with 20 allowed: %v, want ErrExpiryTooLong", err)
			}
			noExpiry := req
			noExpiry.ExpiresAt = nil
			if _, err := s.CreatePersonalKey(ctx, noExpiry, "llp_maker", t0); !errors.Is(err, ErrExpiryTooLong) {
				t.Fatalf("create without expiry: %v, want ErrExpiryTooLong", err)
			}
			in20 := t0.Add(20 * day)
			req.ExpiresAt = &in20
			got, err := s.CreatePersonalKey(ctx, req, "llp_maker", t0)
			if err != nil || got.Secret == "" || got.Origin != adminwire.KeyOriginConsole || got.CreatedBy != "llp_maker" || got.Managed() {
				t.Fatalf("CreatePersonalKey: %+v %v", got, err)
			}
			managed, err := s.CreateKeyBy(ctx, adminwire.CreateKeyRequest{TeamID: team, Name: "tf"}, "", "admin API (tf)", t0)
			if err != nil || managed.Origin != adminwire.KeyOriginAdmin || !managed.Managed() {
				t.Fatalf("CreateKeyBy: %+v %v", managed, err)
			}
			if _, err := s.RevokePersonalKey(ctx, team, managed.ID, "llp_maker", t0); !errors.Is(err, ErrKeyManaged) {
				t.Errorf("revoke a managed key: %v, want ErrKeyManaged", err)
			}
			if _, err := s.RevokePersonalKey(ctx, other, got.ID, "llp_other", t0); !errors.Is(err, ErrNotFound) {
				t.Errorf("revoke another team's key: %v, want ErrNotFound", err)
			}
			off := false
			if _, err := s.SetSelfService(ctx, team, &off, nil); err != nil {
				t.Fatal(err)
			}
			k, err := s.RevokePersonalKey(ctx, team, got.ID, "llp_revoker", t0.Add(time.Hour))
			if err != nil || k.RevokedAt == nil || k.RevokedBy != "llp_revoker" {
				t.Fatalf("revoke own personal key with self-service off: %+v %v", k, err)
			}
			again, err := s.RevokePersonalKey(ctx, team, got.ID, "llp_late", t0.Add(2*time.Hour))
			if err != nil || !again.RevokedAt.Equal(*k.RevokedAt) || again.RevokedBy != "llp_revoker" {
				t.Errorf("revoke again: %+v %v, want the first revocation kept", again, err)
			}
		})
	}
}
