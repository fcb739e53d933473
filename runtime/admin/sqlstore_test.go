package admin

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/credential"
	"github.com/llmplat/llmplat/runtime/store"
)

// t0 is the contract tests' clock, at microsecond precision.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// mustTeam creates a team and returns its id.

func mustTeam(t *testing.T, s *SQLStore, name string) int64 {
	t.Helper()
	tm, _, err := s.CreateTeam(context.Background(), name, t0)
	if err != nil {
		t.Fatalf("create team %s: %v", name, err)
	}
	return tm.ID
}

func TestTeamsContract(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			s := NewSQLStore(migratedDB(t, dc.dsn(t)))
			first, created, err := s.CreateTeam(ctx, "search", t0)
			if err != nil || !created {
				t.Fatalf("CreateTeam = created %v, %v; want created", created, err)
			}
			again, created, err := s.CreateTeam(ctx, "search", t0.Add(time.Hour))
			if err != nil || created || again != first {
				t.Errorf("CreateTeam again = %+v, created %v, %v; want %+v, not created", again, created, err, first)
			}
			id, err := s.TeamByName(ctx, "search")
			if err != nil || id != first.ID {
				t.Errorf("TeamByName = %d, %v; want %d", id, err, first.ID)
			}
			if _, err := s.TeamByName(ctx, "nobody"); !errors.Is(err, auth.ErrTeamNotFound) {
				t.Errorf("TeamByName(unknown) error = %v, want auth.ErrTeamNotFound", err)
			}
			other := mustTeam(t, s, "ads")
			if _, err := s.RenameTeam(ctx, other, "search"); !errors.Is(err, ErrNameTaken) {
				t.Errorf("rename onto a taken name: error = %v, want ErrNameTaken", err)
			}
			if _, err := s.RenameTeam(ctx, 999, "x"); !errors.Is(err, ErrTeamNotFound) {
				t.Errorf("rename a missing team: error = %v, want ErrTeamNotFound", err)
			}
			renamed, err := s.RenameTeam(ctx, other, "ads-2")
			if err != nil || renamed.Name != "ads-2" {
				t.Errorf("RenameTeam = %+v, %v", renamed, err)
			}
		})
	}
}

// warmPool leaves n open connections idle in db's pool, so n goroutines

// start their transactions at once instead of one per connection set-up.

func TestModelsContract(t *testing.T) {
	ctx := context.Background()
	spec := adminwire.ModelSpec{ServedName: "meta-llama/Llama-3.1-8B-Instruct", PromptPriceMicroPerMTok: 100_000,
		CompletionPriceMicroPerMTok: 400_000, MaxContextTokens: 8192, MaxOutputTokens: 4096}
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			s := NewSQLStore(migratedDB(t, dc.dsn(t)))
			m, created, err := s.PutModel(ctx, "llama-8b", spec, t0)
			if err != nil || !created || m.ModelSpec != spec || !m.UpdatedAt.Equal(t0) {
				t.Fatalf("first put = %+v, created %v, %v", m, created, err)
			}
			same, created, err := s.PutModel(ctx, "llama-8b", spec, t0.Add(time.Hour))
			if err != nil || created || !same.UpdatedAt.Equal(t0) {
				t.Errorf("unchanged put = updated_at %v, created %v, %v; want %v kept", same.UpdatedAt, created, err, t0)
			}
			changed := spec
			changed.MaxOutputTokens = 2048
			upd, created, err := s.PutModel(ctx, "llama-8b", changed, t0.Add(2*time.Hour))
			if err != nil || created || upd.MaxOutputTokens != 2048 || !upd.UpdatedAt.Equal(t0.Add(2*time.Hour)) || !upd.CreatedAt.Equal(t0) {
				t.Errorf("changing put = %+v, created %v, %v", upd, created, err)
			}
			got, err := s.GetModel(ctx, "llama-8b")
			if err != nil || got != upd {
				t.Errorf("GetModel = %+v, %v; want %+v", got, err, upd)
			}
			if err := s.DeleteModel(ctx, "llama-8b"); err != nil {
				t.Fatalf("DeleteModel: %v", err)
			}
			if err := s.DeleteModel(ctx, "llama-8b"); !errors.Is(err, ErrNotFound) {
				t.Errorf("delete twice: error = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestNodeTokensContract(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migratedDB(t, dc.dsn(t))
			nt := NewSQLNodeTokens(db)
			issued, err := nt.Issue(ctx, "fra-gpu-07", "", t0)
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			if err := nt.Verify(ctx, "fra-gpu-07", issued.Token); err != nil {
				t.Errorf("Verify(issued token) = %v, want nil", err)
			}
			other, err := nt.Issue(ctx, "fra-gpu-08", "", t0)
			if err != nil {
				t.Fatal(err)
			}
			bad := []struct {
				name, node, token string
			}{
				{"another node's token", "fra-gpu-07", other.Token},
				{"unknown token", "fra-gpu-07", credential.NodeTokenPrefix + issued.Token[len(credential.NodeTokenPrefix)+1:] + "x"},
				{"malformed token", "fra-gpu-07", "llp_" + issued.Token[len(credential.NodeTokenPrefix):]},
				{"empty token", "fra-gpu-07", ""},
			}
			for _, tt := range bad {
				if err := nt.Verify(ctx, tt.node, tt.token); !errors.Is(err, ErrInvalidNodeToken) {
					t.Errorf("Verify(%s) = %v, want ErrInvalidNodeToken", tt.name, err)
				}
			}
			revoked, changed, err := nt.Revoke(ctx, issued.ID, t0.Add(time.Minute))
			if err != nil || !changed || revoked.RevokedAt == nil {
				t.Fatalf("Revoke = %+v, changed %v, %v", revoked, changed, err)
			}
			err = nt.Verify(ctx, "fra-gpu-07", issued.Token)
			if !errors.Is(err, ErrInvalidNodeToken) || !errors.Is(err, ErrNodeTokenRevoked) {
				t.Errorf("Verify(revoked) = %v, want ErrInvalidNodeToken and ErrNodeTokenRevoked", err)
			}
			if _, changed, err := nt.Revoke(ctx, issued.ID, t0.Add(time.Hour)); err != nil || changed {
				t.Errorf("second Revoke = changed %v, %v; want unchanged", changed, err)
			}
			if _, _, err := nt.Revoke(ctx, 999, t0); !errors.Is(err, ErrNotFound) {
				t.Errorf("Revoke(missing) = %v, want ErrNotFound", err)
			}
			var events int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM node_events WHERE node_id = $1 AND kind = 'revoke'", "fra-gpu-07").Scan(&events); err != nil {
				t.Fatal(err)
			}
			if events != 1 {
				t.Errorf("revoke events = %d, want 1", events)
			}
			list, err := nt.List(ctx, "fra-gpu-07")
			if err != nil || len(list) != 1 || list[0].ID != issued.ID || list[0].RevokedAt == nil {
				t.Errorf("List = %+v, %v; want the one revoked token", list, err)
			}
			first, err := nt.Issue(ctx, "fra-gpu-09", "tf-1", t0)
			if err != nil {
				t.Fatal(err)
			}
			replay, err := nt.Issue(ctx, "fra-gpu-09", "tf-1", t0)
			if err != nil || replay.ID != first.ID || replay.Token != "" || !replay.Replayed {
				t.Errorf("replayed Issue = %+v, %v; want token %d without its secret", replay, err, first.ID)
			}
			if _, err := nt.Issue(ctx, "fra-gpu-10", "tf-1", t0); !errors.Is(err, ErrIdempotencyConflict) {
				t.Errorf("same key for another node: error = %v, want ErrIdempotencyConflict", err)
			}
		})
	}
}

func TestSecretsAreStoredOnlyAsHashes(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migratedDB(t, dc.dsn(t))
			s := NewSQLStore(db)
			team := mustTeam(t, s, "search")
			key, err := s.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team}, "idem", t0)
			if err != nil {
				t.Fatal(err)
			}
			rotated, err := s.RotateKey(ctx, key.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			tok, err := NewSQLNodeTokens(db).Issue(ctx, "n1", "idem", t0)
			if err != nil {
				t.Fatal(err)
			}
			dump := dumpTables(t, db, "api_keys", "node_tokens", "admin_idempotency", "node_events", "teams")
			for _, secret := range []string{key.Secret, rotated.Secret, tok.Token} {
				assertNoSecret(t, "database", dump, secret)
			}
			var hash []byte
			if err := db.QueryRowContext(ctx, "SELECT hash FROM api_keys WHERE id = $1", key.ID).Scan(&hash); err != nil {
				t.Fatal(err)
			}
			if !credential.EqualHash(hash, credential.HashKey(rotated.Secret)) {
				t.Errorf("stored hash is not SHA-256 of the current secret")
			}
		})
	}
}

// dumpTables renders every value of the tables as text, byte columns both

// raw and in hex.

func dumpTables(t *testing.T, db *store.DB, tables ...string) string {
	t.Helper()
	var out []byte
	for _, table := range tables {
		rows, err := db.QueryContext(context.Background(), "SELECT * FROM "+table)
		if err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("dump %s: %v", table, err)
			}
			for _, v := range vals {
				if b, ok := v.([]byte); ok {
					out = fmt.Appendf(out, "%s %x\n", b, b)
					continue
				}
				out = fmt.Appendf(out, "%v\n", v)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		rows.Close()
	}
	return string(out)
}
