package devmode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/ledger"
)

// devCredits is the local team's opening balance: 100 credits (USD), days
// of local use at the prices below.
const devCredits = 100 * 1_000_000

// devPrices are micro-credits per million tokens, from the capacity plan's
// cost per million output tokens at 50 % utilisation (docs/capacity.md:
// 0.93, 8.2 and 19 USD), prompts at a quarter of that.
var devPrices = map[string]struct{ prompt, completion int64 }{
	"llama-8b":  {232_500, 930_000},
	"qwen-32b":  {2_050_000, 8_200_000},
	"llama-70b": {4_750_000, 19_000_000},
}

// credentials are what a local user needs to call the gateway.
type credentials struct {
	team    string
	key     string
	credits int64
}

// bootstrap declares the models that do not exist yet, then a team with
// credit and an API key, through the same admin store and ledger the admin
// API uses. On a restart on the same data dir it changes nothing: a model
// already declared keeps what the admin API (Terraform) last set, the
// opening credit is granted once (by its idempotency key), and the key
// kept in the data dir is reused while it is valid.
func bootstrap(ctx context.Context, adm *admin.SQLStore, led *ledger.Ledger, sec *secrets, models map[string]int64) (credentials, error) {
	now := time.Now()
	for name, maxLen := range models {
		_, err := adm.GetModel(ctx, name)
		switch {
		case err == nil:
			continue
		case !errors.Is(err, admin.ErrNotFound):
			return credentials{}, fmt.Errorf("read model %s: %w", name, err)
		}
		p, ok := devPrices[name]
		if !ok {
			p = devPrices["llama-8b"]
		}
		spec := adminwire.ModelSpec{ServedName: name, PromptPriceMicroPerMTok: p.prompt, CompletionPriceMicroPerMTok: p.completion,
			MaxContextTokens: int(maxLen), MaxOutputTokens: int(maxLen / 2)}
		if _, _, err := adm.PutModel(ctx, name, spec, now); err != nil {
			return credentials{}, fmt.Errorf("declare model %s: %w", name, err)
		}
	}
	const team = "local"
	tm, _, err := adm.CreateTeam(ctx, team, now)
	if err != nil {
		return credentials{}, fmt.Errorf("create team: %w", err)
	}
	if _, err := led.AddCredit(ctx, tm.ID, "dev-opening-balance", devCredits, "local mode"); err != nil {
		return credentials{}, fmt.Errorf("grant credit: %w", err)
	}
	key, err := sec.apiKey(ctx, adm, tm.ID, now)
	if err != nil {
		return credentials{}, err
	}
	// The balance, not the opening credit: a restart may follow some use.
	if tm, err = adm.GetTeam(ctx, tm.ID); err != nil {
		return credentials{}, fmt.Errorf("read team: %w", err)
	}
	return credentials{team: team, key: key, credits: tm.BalanceMicrocredits / 1_000_000}, nil
}
