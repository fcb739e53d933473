package costreport

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/golden"
	"github.com/llmplat/llmplat/runtime/store"
)

// want is a row's numbers, worked out by hand from the fixture week
// (costreporttest.Week and the testdata snapshots).
type want struct {
	gpuHours, idle, idlePerWeek  float64
	requests, prompt, completion int64
	cost                         float64
	perMillion                   float64 // zero: the row has no output tokens
	billed                       float64
	drift                        *wantDrift
}

type wantDrift struct {
	settled int64
	engine  float64
	drift   float64
	within  bool
}

// checkRow compares every number of a row, one named subtest each.
func checkRow(t *testing.T, got ModelReport, w want) {
	t.Helper()
	floats := []struct {
		name      string
		got, want float64
	}{
		{"GPU-hours", got.GPUHours, w.gpuHours},
		{"idle GPU-hours", got.IdleGPUHours, w.idle},
		{"idle GPU-hours per week", got.IdleGPUHoursPerWeek, w.idlePerWeek},
		{"cost USD", got.CostUSD, w.cost},
		{"billed USD", got.BilledUSD, w.billed},
	}
	for _, f := range floats {
		t.Run(f.name, func(t *testing.T) {
			if !approxEqual(f.got, f.want) {
				t.Errorf("got %v, want %v", f.got, f.want)
			}
		})
	}
	ints := []struct {
		name      string
		got, want int64
	}{
		{"requests", got.Requests, w.requests},
		{"prompt tokens", got.PromptTokens, w.prompt},
		{"output tokens", got.CompletionTokens, w.completion},
	}
	for _, f := range ints {
		t.Run(f.name, func(t *testing.T) {
			if f.got != f.want {
				t.Errorf("got %d, want %d", f.got, f.want)
			}
		})
	}
	t.Run("cost per million output tokens", func(t *testing.T) {
		switch {
		case w.perMillion == 0 && got.CostPerMillionOutputTokensUSD != nil:
			t.Errorf("got %v, want none", *got.CostPerMillionOutputTokensUSD)
		case w.perMillion != 0 && (got.CostPerMillionOutputTokensUSD == nil || !approxEqual(*got.CostPerMillionOutputTokensUSD, w.perMillion)):
			t.Errorf("got %v, want %v", got.CostPerMillionOutputTokensUSD, w.perMillion)
		}
	})
	t.Run("drift", func(t *testing.T) {
		checkDrift(t, got.Drift, w.drift)
	})
}

func checkDrift(t *testing.T, got *Drift, w *wantDrift) {
	t.Helper()
	switch {
	case w == nil && got == nil:
		return
	case w == nil || got == nil:
		t.Fatalf("got %+v, want %+v", got, w)
	}
	if got.SettledCompletionTokens != w.settled || !approxEqual(got.EngineGenerationTokens, w.engine) {
		t.Errorf("got settled %d, engines %v; want %d, %v", got.SettledCompletionTokens, got.EngineGenerationTokens, w.settled, w.engine)
	}
	switch {
	case got.Drift == nil:
		t.Errorf("got no drift, want %v", w.drift)
	case !approxEqual(*got.Drift, w.drift):
		t.Errorf("got drift %v, want %v", *got.Drift, w.drift)
	}
	if got.WithinTarget != w.within {
		t.Errorf("got within target %v, want %v", got.WithinTarget, w.within)
	}
}

// weekWant is the fixture week from node events and snapshots, by hand:
//
//   - llama-8b: cloud-8b-a up 168 h and onprem-8b-b 72 + 72 h, 1 GPU each:
//     312 GPU-hours, 780 USD at 2.5. Requests arrive in hours 8–20 (84 of
//     168): cloud-8b-a is idle 84 h, onprem-8b-b 36 + 36 h: 156. 84 hours ×
//     2 requests; prompt 84 × 1,500, output 84 × 650 = 54,600. Billed 84 ×
//     (1,000 × 0.2 + 400 × 0.6 + 500 × 0.2 + 250 × 0.6) = 84 × 690 µ. The
//     engines: 1,046,820 − 1,000,000 on cloud-8b-a, and 7,800 on
//     onprem-8b-b, whose counter reset from 30,000: 54,620.
//   - qwen-32b: 168 h × 2 GPUs = 336, 840 USD; 40 active hours (8 a day,
//     Monday to Friday), 128 idle × 2 = 256; 40 × 2,000 and 40 × 500
//     tokens, billed 40 × 1,750 µ; engines 519,800 − 500,000 = 19,800.
//   - llama-70b: 6 + 8 h × 4 GPUs = 56, 140 USD; active hours 49, 50, 51
//     and 161, idle 3 + 7 h × 4 = 40; 4 × 3,000 and 4 × 800 tokens, billed
//     4 × 5,400 µ; engines 3,199, new in the end snapshot.
//   - (none): onprem-spare, 12 h × 2 GPUs, all idle, 60 USD.
var weekWant = map[string]want{
	"llama-8b": {gpuHours: 312, idle: 156, idlePerWeek: 156, requests: 168, prompt: 126_000, completion: 54_600,
		cost: 780, perMillion: 780 / 0.0546, billed: 0.05796,
		drift: &wantDrift{settled: 54_600, engine: 54_620, drift: -20.0 / 54_620, within: true}},
	"qwen-32b": {gpuHours: 336, idle: 256, idlePerWeek: 256, requests: 40, prompt: 80_000, completion: 20_000,
		cost: 840, perMillion: 42_000, billed: 0.07,
		drift: &wantDrift{settled: 20_000, engine: 19_800, drift: 200.0 / 19_800, within: false}},
	"llama-70b": {gpuHours: 56, idle: 40, idlePerWeek: 40, requests: 4, prompt: 12_000, completion: 3_200,
		cost: 140, perMillion: 43_750, billed: 0.0216,
		drift: &wantDrift{settled: 3_200, engine: 3_199, drift: 1.0 / 3_199, within: true}},
	NoModel: {gpuHours: 24, idle: 24, idlePerWeek: 24, cost: 60},
	"total": {gpuHours: 728, idle: 476, idlePerWeek: 476, requests: 212, prompt: 218_000, completion: 77_800,
		cost: 1_820, perMillion: 1_820 / 0.0778, billed: 0.14956,
		drift: &wantDrift{settled: 77_800, engine: 77_619, drift: 181.0 / 77_619, within: false}},
}

func TestFixtureWeek(t *testing.T) {
	for _, dc := range dialects {
		t.Run(dc.name, func(t *testing.T) {
			db := fixtureDB(t, dc.dsn(t))
			r := nodeReport(t, db, week)
			if len(r.Models) != 4 {
				t.Fatalf("got %d rows, want llama-70b, llama-8b, qwen-32b and (none)", len(r.Models))
			}
			for _, m := range []string{"llama-70b", "llama-8b", "qwen-32b", NoModel} {
				t.Run(m, func(t *testing.T) { checkRow(t, rowOf(t, r, m), weekWant[m]) })
			}
			t.Run("total", func(t *testing.T) { checkRow(t, r.Total, weekWant["total"]) })
			t.Run("teams", func(t *testing.T) {
				got := rowOf(t, r, "llama-8b").Teams
				if len(got) != 2 || got[0].Team != "search" || got[0].CompletionTokens != 84*400 ||
					got[1].Team != "support" || got[1].PromptTokens != 84*500 || got[1].BilledMicrocredits != 84*250 {
					t.Errorf("got %+v, want search 84 × 400 output tokens, support 84 × 500 prompt and 84 × 250 µ", got)
				}
			})
			var table, js bytes.Buffer
			if err := WriteTable(&table, r); err != nil {
				t.Fatal(err)
			}
			if err := WriteJSON(&js, r); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "week.golden.txt", table.Bytes())
			golden.Check(t, "week.golden.json", js.Bytes())
		})
	}
}

// TestTwoDayWindow reports Tuesday and Wednesday (hours 24–72) from node
// events alone: idle hours scale to a week by 168 ÷ 48 = 3.5, and there is
// no drift.
//
//   - llama-8b: both nodes up 48 h: 96 GPU-hours, 240 USD; 24 active hours,
//     idle 24 + 24 = 48, 168 a week; 24 × 2 requests, 24 × 1,500 and
//     24 × 650 tokens.
//   - qwen-32b: 48 h × 2 = 96, 240 USD; 16 active hours, idle 32 × 2 = 64,
//     224 a week; 16 requests.
//   - llama-70b: hours 48–54 × 4 = 24, 60 USD; idle 3 × 4 = 12, 42 a week;
//     3 requests.
//   - onprem-spare was up only in hours 0–12: no row.
func TestTwoDayWindow(t *testing.T) {
	w := Window{From: week.From.Add(24 * time.Hour), To: week.From.Add(72 * time.Hour)}
	wants := map[string]want{
		"llama-8b": {gpuHours: 96, idle: 48, idlePerWeek: 168, requests: 48, prompt: 36_000, completion: 15_600,
			cost: 240, perMillion: 240 / 0.0156, billed: 24 * 690e-6},
		"qwen-32b": {gpuHours: 96, idle: 64, idlePerWeek: 224, requests: 16, prompt: 32_000, completion: 8_000,
			cost: 240, perMillion: 30_000, billed: 16 * 1750e-6},
		"llama-70b": {gpuHours: 24, idle: 12, idlePerWeek: 42, requests: 3, prompt: 9_000, completion: 2_400,
			cost: 60, perMillion: 25_000, billed: 3 * 5400e-6},
	}
	for _, dc := range dialects {
		t.Run(dc.name, func(t *testing.T) {
			db := fixtureDB(t, dc.dsn(t))
			r, err := Generate(context.Background(), db, Options{Window: w, GPU: NodeEvents{DB: db, Profiles: referenceProfiles()}})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Models) != 3 || r.EngineTokenSource != "" || r.Total.Drift != nil {
				t.Fatalf("got %d rows, engine source %q, total drift %v; want 3 rows and no drift",
					len(r.Models), r.EngineTokenSource, r.Total.Drift)
			}
			for m, wm := range wants {
				t.Run(m, func(t *testing.T) { checkRow(t, rowOf(t, r, m), wm) })
			}
		})
	}
}

// TestPriceOverride prices every GPU-hour at a given price instead of the
// L40S profile's 2.5 USD.
func TestPriceOverride(t *testing.T) {
	db := fixtureDB(t, dialects[0].dsn(t))
	r, err := Generate(context.Background(), db, Options{Window: week,
		GPU: NodeEvents{DB: db, Profiles: referenceProfiles().WithPrice(1.25)}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rowOf(t, r, "llama-8b").CostUSD, 312*1.25; !approxEqual(got, want) {
		t.Errorf("llama-8b cost: got %v, want %v", got, want)
	}
	if got, want := r.Total.CostUSD, 728*1.25; !approxEqual(got, want) {
		t.Errorf("total cost: got %v, want %v", got, want)
	}
}

func TestGenerateErrors(t *testing.T) {
	nodes := func(db *store.DB) NodeEvents { return NodeEvents{DB: db, Profiles: referenceProfiles()} }
	tests := []struct {
		name    string
		setup   func(t *testing.T, db *store.DB)
		opts    func(db *store.DB) Options
		wantErr error
	}{
		{"window that ends before it starts", nil,
			func(db *store.DB) Options {
				return Options{Window: Window{From: week.To, To: week.From}, GPU: nodes(db)}
			},
			ErrBadWindow},
		{"node of a GPU kind without a price", addNode("MI300X"),
			func(db *store.DB) Options { return Options{Window: week, GPU: nodes(db)} },
			ErrUnknownPrice},
		{"snapshot without vLLM's counter", nil,
			func(db *store.DB) Options {
				return Options{Window: week, GPU: nodes(db),
					Engine: Snapshots{Paths: []string{snapshotPaths[0], filepath.Join("testdata", "metrics_not_vllm.prom")}}}
			},
			ErrNoEngineSeries},
		{"one snapshot", nil,
			func(db *store.DB) Options {
				return Options{Window: week, GPU: nodes(db), Engine: Snapshots{Paths: snapshotPaths[:1]}}
			},
			ErrTooFewSnapshots},
		{"missing snapshot file", nil,
			func(db *store.DB) Options {
				return Options{Window: week, GPU: nodes(db),
					Engine: Snapshots{Paths: []string{snapshotPaths[0], filepath.Join("testdata", "no_such.prom")}}}
			},
			fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := fixtureDB(t, dialects[1].dsn(t))
			if tt.setup != nil {
				tt.setup(t, db)
			}
			_, err := Generate(context.Background(), db, tt.opts(db))
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// addNode returns a setup that registers a one-GPU node of a GPU kind at
// the window's start.
func addNode(gpuKind string) func(t *testing.T, db *store.DB) {
	return func(t *testing.T, db *store.DB) {
		t.Helper()
		ctx := context.Background()
		if _, err := db.ExecContext(ctx, `INSERT INTO nodes (id, location, gpus, gpu_model, models)
			VALUES ('odd', 'onprem', 1, $1, '["llama-8b"]')`, gpuKind); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO node_events (node_id, kind, created_at)
			VALUES ('odd', 'register', $1)`, week.From); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCountUnpriced: with CountUnpriced a node of a GPU kind without a
// price adds its hours as unpriced GPU-hours and nothing to the cost,
// where the report would otherwise fail (TestGenerateErrors).
func TestCountUnpriced(t *testing.T) {
	ctx := context.Background()
	opts := func(db *store.DB) Options {
		return Options{Window: week, GPU: NodeEvents{DB: db, Profiles: referenceProfiles(), CountUnpriced: true}}
	}
	baseDB := fixtureDB(t, dialects[1].dsn(t))
	base, err := Generate(ctx, baseDB, opts(baseDB))
	if err != nil {
		t.Fatal(err)
	}
	db := fixtureDB(t, dialects[1].dsn(t))
	addNode("MI300X")(t, db)
	r, err := Generate(ctx, db, opts(db))
	if err != nil {
		t.Fatalf("a node of an unpriced GPU kind failed the report: %v", err)
	}
	hours := week.Hours()
	if got := r.Total.UnpricedGPUHours; !approxEqual(got, hours) {
		t.Errorf("unpriced GPU-hours %v, want the odd node's %v", got, hours)
	}
	if got := rowOf(t, r, "llama-8b").UnpricedGPUHours; !approxEqual(got, hours) {
		t.Errorf("llama-8b's unpriced GPU-hours %v, want %v", got, hours)
	}
	if !approxEqual(r.Total.GPUHours, base.Total.GPUHours+hours) || !approxEqual(r.Total.CostUSD, base.Total.CostUSD) {
		t.Errorf("total %v GPU-hours costing %v USD; want the fixture's %v + %v hours at the fixture's %v USD",
			r.Total.GPUHours, r.Total.CostUSD, base.Total.GPUHours, hours, base.Total.CostUSD)
	}
	if base.Total.UnpricedGPUHours != 0 {
		t.Errorf("the fixture alone has %v unpriced GPU-hours, want 0", base.Total.UnpricedGPUHours)
	}
}

// TestWriteTableNamesNodesWithoutGPUs: the table `llmplat report` prints
// names the nodes up in the window that registered no GPU, whose time its
// GPU-hours leave out; a report without such nodes says nothing of them.
func TestWriteTableNamesNodesWithoutGPUs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []string
		want  string
	}{
		{"some", []string{"local-llama-8b", "local-qwen-32b"},
			"2 node(s) up in the window registered no GPU and count no GPU-hours: local-llama-8b, local-qwen-32b\n"},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteTable(&b, Report{From: week.From, To: week.To, WindowHours: week.Hours(), NodesWithoutGPUs: tc.nodes}); err != nil {
				t.Fatal(err)
			}
			got := b.String()
			if tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("the table lacks %q:\n%s", tc.want, got)
			}
			if tc.want == "" && strings.Contains(got, "registered no GPU") {
				t.Errorf("a report without GPU-less nodes speaks of them:\n%s", got)
			}
		})
	}
}
