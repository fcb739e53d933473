package capacity_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/golden"
)

func TestGoldenOutput(t *testing.T) {
	ref := referencePlan(t)
	custom, err := loadAndPlan(filepath.Join(examplesDir, "custom.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		res    capacity.Result
		write  func(*bytes.Buffer, capacity.Result) error
		golden string
	}{
		{"reference table", ref, func(b *bytes.Buffer, r capacity.Result) error { return capacity.WriteTable(b, r) }, "reference_plan.golden.txt"},
		{"reference json", ref, func(b *bytes.Buffer, r capacity.Result) error { return capacity.WriteJSON(b, r) }, "reference_plan.golden.json"},
		{"custom table", custom, func(b *bytes.Buffer, r capacity.Result) error { return capacity.WriteTable(b, r) }, "custom_plan.golden.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.write(&b, tt.res); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, tt.golden, b.Bytes())
		})
	}
}

// TestJSONRoundTrip proves the JSON carries every number of the plan: it
// decodes back into a Result equal to the planner's.
func TestJSONRoundTrip(t *testing.T) {
	for _, path := range []string{"", filepath.Join(examplesDir, "custom.yaml")} {
		name := "reference"
		if path != "" {
			name = filepath.Base(path)
		}
		t.Run(name, func(t *testing.T) {
			want := referencePlan(t)
			if path != "" {
				var err error
				if want, err = loadAndPlan(path); err != nil {
					t.Fatal(err)
				}
			}
			var b bytes.Buffer
			if err := capacity.WriteJSON(&b, want); err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(&b)
			dec.DisallowUnknownFields()
			var got capacity.Result
			if err := dec.Decode(&got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestTableSections(t *testing.T) {
	var b bytes.Buffer
	if err := capacity.WriteTable(&b, referencePlan(t)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KV cache, streams and vLLM flags", "Fleet at peak", "Cost (cloud GPUs only)", "Queue budget"} {
		t.Run(want, func(t *testing.T) {
			if !strings.Contains(b.String(), "\n"+want) {
				t.Errorf("table has no section %q", want)
			}
		})
	}
}

// failingWriter fails every write.
type failingWriter struct{}

var errWrite = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestWriteErrors(t *testing.T) {
	res := referencePlan(t)
	tests := []struct {
		name  string
		write func() error
	}{
		{"table", func() error { return capacity.WriteTable(failingWriter{}, res) }},
		{"json", func() error { return capacity.WriteJSON(failingWriter{}, res) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.write(); !errors.Is(got, errWrite) {
				t.Errorf("got %v, want %v", got, errWrite)
			}
		})
	}
}

func TestRoundSig(t *testing.T) {
	tests := []struct {
		name   string
		x      float64
		digits int
		want   float64
	}{
		{"0.463 to 0.46", 2.5 / 5.4, 2, 0.46},
		{"0.926 to 0.93", 2.5 / 5.4 / 0.5, 2, 0.93},
		{"9.26 to 9.3", 10 / 1.08, 2, 9.3},
		{"a half rounds away from zero", 3.75, 2, 3.8},
		{"112.5 to 110", 112.5, 2, 110},
		{"46.875 to 47", 46.875, 2, 47},
		{"negative", -4.375, 2, -4.4},
		{"zero", 0, 2, 0},
		{"three figures", 22.64, 3, 22.6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := capacity.RoundSig(tt.x, tt.digits); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDocShowsRealOutput keeps docs/capacity.md honest: the outputs it
// pastes are the golden files, byte for byte.
func TestDocShowsRealOutput(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "capacity.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"reference_plan.golden.txt", "custom_plan.golden.txt"} {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(doc, append(append([]byte("```\n"), want...), "```"...)) {
				t.Errorf("docs/capacity.md does not show %s verbatim in a code block", name)
			}
		})
	}
}
