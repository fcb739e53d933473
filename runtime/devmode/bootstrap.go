package devmode

import (
	"context"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/admin"
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

// bootstrap declares the models, then a team with credit and an API key,
// through the same admin store and ledger the admin API uses.
func bootstrap(ctx context.Context, adm *admin.SQLStore, led *ledger.Ledger, models map[string]int64) (credentials, error) {
	now := time.Now()
	for name, maxLen := range models {
		p, ok := devPrices[name]
		if !ok {
			p = devPrices["llama-8b"]
		}
		spec := admin.ModelSpec{ServedName: name, PromptPriceMicroPerMTok: p.prompt, CompletionPriceMicroPerMTok: p.completion,
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
	key, err := adm.CreateKey(ctx, admin.CreateKeyRequest{TeamID: tm.ID, Name: "dev", RPM: 600, TokensPerDay: 10_000_000, MaxStreams: 64}, "", now)
	if err != nil {
		return credentials{}, fmt.Errorf("create key: %w", err)
	}
	return credentials{team: team, key: key.Secret, credits: devCredits / 1_000_000}, nil
}
