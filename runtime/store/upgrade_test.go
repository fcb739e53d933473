package store

import (
	"context"
	"database/sql"
	"testing"
)

// TestUpgradeAddsKeyMaxTokens: a database at 0003 with a key in it
// migrates to api_keys.max_tokens with the key kept, limits and all, and
// no cap (NULL); from then on a cap is stored, and 0 or less (the API's
// "no cap" is NULL) is refused by the column's CHECK.
func TestUpgradeAddsKeyMaxTokens(t *testing.T) {
	ctx := context.Background()
	const before = 3 // the last migration without the column
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := openTest(t, dc.dsn(t))
			migs := embeddedMigrations(t, db.Dialect())
			if len(migs) <= before || migs[before].name != "0004_key_max_tokens.sql" {
				t.Fatalf("migration %d is not 0004_key_max_tokens.sql: %+v", before+1, migs)
			}
			if _, err := db.migrate(ctx, migs[:before]); err != nil {
				t.Fatalf("migrate to %d: %v", before, err)
			}
			team := insertTeam(t, db, "a")
			var old int64
			if err := db.QueryRowContext(ctx, `INSERT INTO api_keys (team_id, prefix, hash, rpm, max_streams)
				VALUES ($1, 'llp_old', $2, 60, 4) RETURNING id`, team, []byte("h-old")).Scan(&old); err != nil {
				t.Fatalf("insert a key at %d: %v", before, err)
			}
			if err := db.Migrate(ctx); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			var (
				rpm, streams int64
				maxTokens    sql.NullInt64
			)
			if err := db.QueryRowContext(ctx, "SELECT rpm, max_streams, max_tokens FROM api_keys WHERE id = $1", old).
				Scan(&rpm, &streams, &maxTokens); err != nil {
				t.Fatalf("read the old key: %v", err)
			}
			if rpm != 60 || streams != 4 || maxTokens.Valid {
				t.Errorf("old key after the upgrade: rpm %d, max_streams %d, max_tokens %v; want 60, 4, NULL", rpm, streams, maxTokens)
			}
			insert := "INSERT INTO api_keys (team_id, prefix, hash, max_tokens) VALUES ($1, $2, $3, $4)"
			if _, err := db.ExecContext(ctx, insert, team, "llp_cap", []byte("h-cap"), 4096); err != nil {
				t.Fatalf("insert a key with max_tokens 4096: %v", err)
			}
			for _, bad := range []int64{0, -1} {
				_, err := db.ExecContext(ctx, insert, team, "llp_bad", []byte("h-bad"), bad)
				if !IsCheckViolation(err) {
					t.Errorf("max_tokens %d: error = %v, want a check violation", bad, err)
				}
			}
		})
	}
}
