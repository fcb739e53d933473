package costreport

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// vllmPage is one engine's own /metrics page as vLLM writes it (counters
// typed, with their _created gauges), with the generation counter at v.
func vllmPage(v string) string {
	return `# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} ` + v + `
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7724096e+09
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
`
}

func parse(t *testing.T, text string) Snapshot {
	t.Helper()
	s, err := ParseSnapshot(strings.NewReader(text))
	if err != nil {
		t.Fatalf("ParseSnapshot: %v", err)
	}
	return s
}

// series is a federated generation counter of one engine.
func series(instance, model, value string) string {
	return `vllm:generation_tokens_total{engine="0",instance="` + instance + `",model_name="` + model + `"} ` + value + "\n"
}

func TestGenerationIncrease(t *testing.T) {
	const head = "# TYPE vllm:generation_tokens_total untyped\n"
	tests := []struct {
		name  string
		pages []string
		want  map[string]float64
	}{
		{"one engine's own page", []string{vllmPage("100"), vllmPage("1.5e+03")}, map[string]float64{"m": 1400}},
		{"engines of one model add up", []string{
			head + series("a", "m", "10") + series("b", "m", "20"),
			head + series("a", "m", "15") + series("b", "m", "27"),
		}, map[string]float64{"m": 12}},
		{"a counter that went down was reset and counts its new value", []string{
			head + series("a", "m", "30000"),
			head + series("a", "m", "7800"),
		}, map[string]float64{"m": 7800}},
		{"a reset between the middle and the end snapshot", []string{
			head + series("a", "m", "100"),
			head + series("a", "m", "400"),
			head + series("a", "m", "50"),
		}, map[string]float64{"m": 350}},
		{"a new engine counts from zero", []string{
			head + series("a", "m", "5"),
			head + series("a", "m", "5") + series("b", "n", "42"),
		}, map[string]float64{"m": 0, "n": 42}},
		{"a vanished engine counts nothing after its last snapshot", []string{
			head + series("a", "m", "5") + series("b", "m", "9"),
			head + series("a", "m", "8"),
		}, map[string]float64{"m": 3}},
		{"engines told apart by every label", []string{
			head + series("a", "m", "1") + series("a", "n", "2"),
			head + series("a", "m", "11") + series("a", "n", "102"),
		}, map[string]float64{"m": 10, "n": 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snaps := make([]Snapshot, len(tt.pages))
			for i, p := range tt.pages {
				snaps[i] = parse(t, p)
			}
			got := GenerationIncrease(snaps...)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for m, w := range tt.want {
				if !approxEqual(got[m], w) {
					t.Errorf("%s: got %v, want %v", m, got[m], w)
				}
			}
		})
	}
}

func TestFixtureSnapshots(t *testing.T) {
	got, err := Snapshots{Paths: snapshotPaths}.GenerationTokens(context.Background(), week)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"meta-llama/Llama-3.1-8B-Instruct":      46_820 + 7_800, // cloud-8b-a's increase, onprem-8b-b's reset
		"Qwen/Qwen2.5-32B-Instruct":             19_800,
		"meta-llama/Llama-3.1-70B-Instruct-FP8": 3_199,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for m, w := range want {
		if got[m] != w {
			t.Errorf("%s: got %v, want %v", m, got[m], w)
		}
	}
}

func TestParseSnapshotErrors(t *testing.T) {
	tests := []struct {
		name, text string
		wantErr    error
	}{
		{"no generation counter", "# TYPE up gauge\nup 1\n", ErrNoEngineSeries},
		{"empty page", "", ErrNoEngineSeries},
		{"counter of the wrong type", "# TYPE vllm:generation_tokens_total gauge\nvllm:generation_tokens_total 1\n", ErrNotCounter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseSnapshot(strings.NewReader(tt.text)); !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
	t.Run("not the text format", func(t *testing.T) {
		if _, err := ParseSnapshot(strings.NewReader(`{"status": "success"}`)); err == nil {
			t.Error("got no error for JSON")
		}
	})
}
