package store

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// ledgerInsert adds a usage_ledger row; the columns after request_id are
// status, settled_from and settled_at.
const ledgerInsert = `INSERT INTO usage_ledger
	(request_id, team_id, model, reserved_microcredits, status, settled_from, settled_at, created_at)
	VALUES ($1, $2, 'm', 100, $3, $4, $5, $6)`

func TestUniqueRequestID(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migrated(t, dc.dsn(t))
			team := insertTeam(t, db, "a")
			now := time.Now()
			if _, err := db.ExecContext(ctx, ledgerInsert, "req-1", team, "reserved", nil, nil, now); err != nil {
				t.Fatalf("first insert: %v", err)
			}
			_, err := db.ExecContext(ctx, ledgerInsert, "req-1", team, "reserved", nil, nil, now)
			if !IsUniqueViolation(err) {
				t.Fatalf("duplicate insert error = %v, want a unique violation", err)
			}
			if IsCheckViolation(err) || IsForeignKeyViolation(err) {
				t.Errorf("unique violation also classified as another kind: %v", err)
			}
			res, err := db.ExecContext(ctx, `INSERT INTO usage_ledger (request_id, team_id, model, reserved_microcredits, created_at)
				VALUES ($1, $2, 'm', 1, $3) ON CONFLICT (request_id) DO NOTHING`, "req-1", team, now)
			if err != nil {
				t.Fatalf("insert on conflict do nothing: %v", err)
			}
			if n, err := res.RowsAffected(); err != nil || n != 0 {
				t.Errorf("ON CONFLICT DO NOTHING affected %d rows (%v), want 0", n, err)
			}
		})
	}
}

func TestColumnsRejectBadValues(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	tests := []struct {
		name        string
		status      string
		settledFrom any
		settledAt   any
		wantOK      bool
	}{
		{name: "reserved", status: "reserved", wantOK: true},
		{name: "settled exactly", status: "settled", settledFrom: "exact", settledAt: now, wantOK: true},
		{name: "cancelled", status: "cancelled", settledAt: now, wantOK: true},
		{name: "unknown status", status: "bogus"},
		{name: "unknown source", status: "settled", settledFrom: "guess", settledAt: now},
		{name: "settled without source", status: "settled", settledAt: now},
		{name: "reserved with source", status: "reserved", settledFrom: "exact"},
		{name: "settled without time", status: "settled", settledFrom: "exact"},
	}
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migrated(t, dc.dsn(t))
			team := insertTeam(t, db, "a")
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					_, err := db.ExecContext(ctx, ledgerInsert, "req-"+tt.name, team, tt.status, tt.settledFrom, tt.settledAt, now)
					if tt.wantOK && err != nil {
						t.Fatalf("insert: %v", err)
					}
					if !tt.wantOK && !IsCheckViolation(err) {
						t.Fatalf("insert error = %v, want a check violation", err)
					}
				})
			}
		})
	}
}

func TestForeignKeysAreEnforced(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migrated(t, dc.dsn(t))
			_, err := db.ExecContext(ctx, "INSERT INTO api_keys (team_id, prefix, hash) VALUES ($1, $2, $3)",
				4242, "sk-abc", []byte{1, 2, 3})
			if !IsForeignKeyViolation(err) {
				t.Fatalf("insert for a missing team: error = %v, want a foreign key violation", err)
			}
		})
	}
}

func TestJSONColumns(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migrated(t, dc.dsn(t))
			team := insertTeam(t, db, "a")
			insert := "INSERT INTO api_keys (team_id, prefix, hash, model_allowlist) VALUES ($1, $2, $3, $4) RETURNING id"
			var id int64
			if err := db.QueryRowContext(ctx, insert, team, "sk-a", []byte("h1"), `["llama-8b","qwen-32b"]`).Scan(&id); err != nil {
				t.Fatalf("insert key: %v", err)
			}
			var raw string
			if err := db.QueryRowContext(ctx, "SELECT model_allowlist FROM api_keys WHERE id = $1", id).Scan(&raw); err != nil {
				t.Fatalf("read allowlist: %v", err)
			}
			var got []string
			if err := json.Unmarshal([]byte(raw), &got); err != nil {
				t.Fatalf("allowlist %q is not JSON: %v", raw, err)
			}
			if want := []string{"llama-8b", "qwen-32b"}; !slices.Equal(got, want) {
				t.Errorf("allowlist = %v, want %v", got, want)
			}
			err := db.QueryRowContext(ctx, insert, team, "sk-b", []byte("h2"), `{"model":"x"}`).Scan(&id)
			if !IsCheckViolation(err) {
				t.Errorf("object as allowlist: error = %v, want a check violation", err)
			}
		})
	}
}

func TestTimesRoundTripAndSort(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migrated(t, dc.dsn(t))
			team := insertTeam(t, db, "a")
			// Whole seconds, fractions of different lengths and another zone
			// must all compare in time order.
			created := []time.Time{t0, t0.Add(500 * time.Millisecond), t0.Add(1250 * time.Microsecond * 1000),
				t0.Add(2 * time.Second).In(time.FixedZone("x", 3600))}
			for i, c := range created {
				if _, err := db.ExecContext(ctx, ledgerInsert, "req-"+string(rune('a'+i)), team, "reserved", nil, nil, c); err != nil {
					t.Fatalf("insert: %v", err)
				}
			}
			var n int
			cutoff := t0.Add(time.Second)
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM usage_ledger WHERE status = 'reserved' AND created_at < $1", cutoff).Scan(&n); err != nil {
				t.Fatalf("count before cutoff: %v", err)
			}
			if n != 2 {
				t.Errorf("rows created before %v = %d, want 2", cutoff, n)
			}
			var got time.Time
			if err := db.QueryRowContext(ctx, "SELECT created_at FROM usage_ledger WHERE request_id = 'req-b'").Scan(&got); err != nil {
				t.Fatalf("read created_at: %v", err)
			}
			if !got.Equal(created[1]) {
				t.Errorf("created_at = %v, want %v", got, created[1])
			}
			var def time.Time
			if err := db.QueryRowContext(ctx, "SELECT created_at FROM teams WHERE id = $1", team).Scan(&def); err != nil {
				t.Fatalf("read default created_at: %v", err)
			}
			if age := time.Since(def); age < -time.Minute || age > time.Minute {
				t.Errorf("default created_at = %v, %v from now", def, age)
			}
		})
	}
}

func TestPlaceholders(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migrated(t, dc.dsn(t))
			var id int64
			// $2 before $1, and $1 used twice.
			err := db.QueryRowContext(ctx,
				"INSERT INTO teams (balance_microcredits, name) VALUES ($2, $1) RETURNING id", "team-x", 77).Scan(&id)
			if err != nil {
				t.Fatalf("insert: %v", err)
			}
			var balance int64
			err = db.QueryRowContext(ctx,
				"SELECT balance_microcredits FROM teams WHERE name = $1 AND id = $2 AND name <> $3 AND name = $1",
				"team-x", id, "other").Scan(&balance)
			if err != nil {
				t.Fatalf("select: %v", err)
			}
			if balance != 77 {
				t.Errorf("balance = %d, want 77", balance)
			}
		})
	}
}
