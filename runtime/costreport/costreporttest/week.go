package costreporttest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/store"
)

// From and To bound the fixture week: Monday 2 March 2026 00:00 UTC to the
// next Monday.
var (
	From = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	To   = From.Add(7 * 24 * time.Hour)
)

// at is the fixture time h hours (and m minutes) after From.
func at(h, m int) time.Time {
	return From.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
}

// model is a row of the models table, prices in micro-credits per million
// tokens.
type model struct {
	name, served            string
	promptPrice, complPrice int64
}

var models = []model{
	{"llama-8b", "meta-llama/Llama-3.1-8B-Instruct", 200_000, 600_000},
	{"qwen-32b", "Qwen/Qwen2.5-32B-Instruct", 500_000, 1_500_000},
	{"llama-70b", "meta-llama/Llama-3.1-70B-Instruct-FP8", 1_000_000, 3_000_000},
}

// node is a row of nodes with its events, in hours from From.
type node struct {
	id, location, models string
	gpus                 int
	events               []event
}

type event struct {
	kind  string
	hours int
}

// nodes are the fixture's fleet, all L40S.
var nodes = []node{
	// Up all week; the register at +30 h is a reconnect.
	{"cloud-8b-a", "cloud", `["llama-8b"]`, 1, []event{{"register", -48}, {"register", 30}}},
	// Registers by served name; up [0, 72) and from 96 on (its engine
	// restarted then).
	{"onprem-8b-b", "onprem", `["meta-llama/Llama-3.1-8B-Instruct"]`, 1,
		[]event{{"register", -24}, {"drain", 72}, {"deregister", 73}, {"register", 96}}},
	// Up all week; a token revoke does not end it.
	{"cloud-32b", "cloud", `["qwen-32b"]`, 2, []event{{"register", -1}, {"revoke", 10}}},
	// Up [48, 54) and [160, 168); its deregister comes after the window.
	{"onprem-70b", "onprem", `["llama-70b"]`, 4,
		[]event{{"register", 48}, {"drain", 54}, {"register", 160}, {"deregister", 170}}},
	// No model: up [0, 12), all idle.
	{"onprem-spare", "onprem", `[]`, 2, []event{{"register", 0}, {"deregister", 12}}},
	// Gone before the window.
	{"cloud-old", "cloud", `["llama-8b"]`, 1, []event{{"register", -72}, {"deregister", -24}}},
}

// request is a ledger row.
type request struct {
	team, model        string
	prompt, completion int64
	status             string // settled, reserved or cancelled
	created            time.Time
}

// requests are the fixture's ledger, described on Week.
func requests() []request {
	var out []request
	for h := range 7 * 24 {
		day, hour := h/24, h%24
		if hour >= 8 && hour < 20 {
			out = append(out,
				request{"search", "llama-8b", 1000, 400, "settled", at(h, 30)},
				request{"support", "llama-8b", 500, 250, "settled", at(h, 30)})
		}
		if day < 5 && hour >= 9 && hour < 17 {
			out = append(out, request{"search", "qwen-32b", 2000, 500, "settled", at(h, 15)})
		}
	}
	for _, h := range []int{49, 50, 51, 161} {
		out = append(out, request{"support", "llama-70b", 3000, 800, "settled", at(h, 5)})
	}
	return append(out,
		request{"search", "llama-8b", 1000, 0, "reserved", at(2, 0)},                    // open: no usage, not active
		request{"search", "llama-8b", 1000, 0, "cancelled", at(3, 0)},                   // cancelled: no usage, not active
		request{"search", "llama-8b", 1000, 400, "settled", at(0, 0).Add(-time.Second)}, // before the window
		request{"search", "llama-8b", 1000, 400, "settled", To},                         // at its end: outside
	)
}

// Week writes the fixture week into db, which must be migrated and empty:
//
//   - teams search and support; models llama-8b, qwen-32b and llama-70b at
//     0.2/0.6, 0.5/1.5 and 1/3 USD per million prompt/completion tokens;
//   - nodes, all L40S: cloud-8b-a (1 GPU, up all week), onprem-8b-b (1 GPU,
//     registered by served name, up hours 0–72 and 96–168), cloud-32b
//     (2 GPUs, up all week), onprem-70b (4 GPUs, up hours 48–54 and
//     160–168), onprem-spare (2 GPUs, no model, up hours 0–12), and
//     cloud-old (gone before the week);
//   - settled requests: llama-8b in hours 8–20 of every day, one per team
//     (search 1,000 prompt and 400 completion tokens, support 500 and 250);
//     qwen-32b in hours 9–17 Monday to Friday, one for search (2,000 and
//     500); llama-70b in hours 49, 50, 51 and 161, one for support (3,000
//     and 800); each billed at its model's prices;
//   - rows that are not usage: one reserved and one cancelled llama-8b
//     request in hours 2 and 3, and settled ones a second before the week
//     and at its end.
func Week(ctx context.Context, db *store.DB) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fixture week: %w", err)
	}
	defer func() {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, rbErr)
		}
	}()
	if err := writeCatalog(ctx, tx); err != nil {
		return fmt.Errorf("fixture week: %w", err)
	}
	if err := writeNodes(ctx, tx); err != nil {
		return fmt.Errorf("fixture week: %w", err)
	}
	if err := writeLedger(ctx, tx); err != nil {
		return fmt.Errorf("fixture week: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fixture week: %w", err)
	}
	return nil
}

func writeCatalog(ctx context.Context, tx *sql.Tx) error {
	for _, team := range []string{"search", "support"} {
		if _, err := tx.ExecContext(ctx, "INSERT INTO teams (name, balance_microcredits) VALUES ($1, $2)",
			team, 100_000_000); err != nil {
			return fmt.Errorf("team %s: %w", team, err)
		}
	}
	for _, m := range models {
		if _, err := tx.ExecContext(ctx, `INSERT INTO models (name, served_name, prompt_price_micro_per_mtok,
			completion_price_micro_per_mtok, max_context_tokens, max_output_tokens) VALUES ($1, $2, $3, $4, 8192, 4096)`,
			m.name, m.served, m.promptPrice, m.complPrice); err != nil {
			return fmt.Errorf("model %s: %w", m.name, err)
		}
	}
	return nil
}

func writeNodes(ctx context.Context, tx *sql.Tx) error {
	for _, n := range nodes {
		if _, err := tx.ExecContext(ctx, `INSERT INTO nodes (id, location, gpus, gpu_model, models, created_at)
			VALUES ($1, $2, $3, 'L40S', $4, $5)`, n.id, n.location, n.gpus, n.models, at(n.events[0].hours, 0)); err != nil {
			return fmt.Errorf("node %s: %w", n.id, err)
		}
		for _, e := range n.events {
			if _, err := tx.ExecContext(ctx, "INSERT INTO node_events (node_id, kind, created_at) VALUES ($1, $2, $3)",
				n.id, e.kind, at(e.hours, 0)); err != nil {
				return fmt.Errorf("node %s event: %w", n.id, err)
			}
		}
	}
	return nil
}

func writeLedger(ctx context.Context, tx *sql.Tx) error {
	prices := map[string]model{}
	for _, m := range models {
		prices[m.name] = m
	}
	for i, r := range requests() {
		p := prices[r.model]
		cost := (r.prompt*p.promptPrice + r.completion*p.complPrice) / 1_000_000
		var settledFrom, settledAt any
		switch r.status {
		case "settled":
			settledFrom, settledAt = "exact", r.created.Add(10*time.Second)
		case "cancelled":
			settledAt, cost = r.created.Add(10*time.Second), 0
		default:
			cost = 0
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage_ledger (request_id, team_id, model, prompt_tokens,
			completion_tokens, reserved_microcredits, cost_microcredits, status, settled_from, created_at, settled_at)
			VALUES ($1, (SELECT id FROM teams WHERE name = $2), $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			fmt.Sprintf("req-%04d", i), r.team, r.model, r.prompt, r.completion, 1_000_000, cost, r.status,
			settledFrom, r.created, settledAt); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
	}
	return nil
}
