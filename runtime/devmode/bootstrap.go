package devmode

import (
	"context"
	"fmt"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/store"
)

// devCredits is the local team's opening balance in credits (1 credit =
// 1 USD): enough for days of local use at the seed's prices.
const devCredits = 100

// microPerCredit converts credits to the ledger's micro-credits.
const microPerCredit = 1_000_000

// credentials are what a local user needs to call the gateway.
type credentials struct {
	team    string
	key     string
	credits int64
}

// bootstrap opens the embedded store, applies the migrations and creates a
// team with credit and an API key whose hash alone is stored.
func bootstrap(ctx context.Context, path string) (credentials, error) {
	db, err := store.Open(ctx, "sqlite:"+path)
	if err != nil {
		return credentials{}, fmt.Errorf("open store: %w", err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return credentials{}, fmt.Errorf("migrate store: %w", err)
	}
	key, err := auth.GenerateKey()
	if err != nil {
		return credentials{}, fmt.Errorf("generate key: %w", err)
	}
	const team = "local"
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return credentials{}, err
	}
	defer tx.Rollback()
	var teamID int64
	err = tx.QueryRowContext(ctx,
		`INSERT INTO teams (name, balance_microcredits) VALUES ($1, $2)
		 ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id`,
		team, devCredits*microPerCredit).Scan(&teamID)
	if err != nil {
		return credentials{}, fmt.Errorf("create team: %w", err)
	}
	_, err = tx.ExecContext(ctx,
		`INSERT INTO api_keys (team_id, name, prefix, hash, rpm, tokens_per_day, max_streams)
		 VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		teamID, "dev", key.Display, key.Hash, 600, 10_000_000, 64)
	if err != nil {
		return credentials{}, fmt.Errorf("create key: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return credentials{}, err
	}
	return credentials{team: team, key: key.Secret, credits: devCredits}, nil
}
