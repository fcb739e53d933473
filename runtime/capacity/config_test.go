package capacity_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// examplesDir holds the plan files shipped for people to copy.
const examplesDir = "../../examples/capacity"

// loadAndPlan reads a plan file and plans it.
func loadAndPlan(path string) (capacity.Result, error) {
	in, err := capacity.LoadConfig(path)
	if err != nil {
		return capacity.Result{}, err
	}
	return capacity.Plan(in)
}

func TestExampleFilesPlan(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("got %d example files in %s, want at least reference.yaml and custom.yaml", len(files), examplesDir)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			res, err := loadAndPlan(f)
			if err != nil {
				t.Fatalf("got error %v, want a plan", err)
			}
			if len(res.Models) == 0 || res.Fleet.GPUsAtPeak == 0 {
				t.Errorf("got %d models and %d GPUs, want some of each", len(res.Models), res.Fleet.GPUsAtPeak)
			}
		})
	}
}

// TestReferenceFilesMatchReferenceInput proves the shipped reference file (and its JSON
// twin) say exactly what ReferenceInput says.
func TestReferenceFilesMatchReferenceInput(t *testing.T) {
	want, err := capacity.Plan(capacity.ReferenceInput())
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(examplesDir, "reference.yaml"), filepath.Join("testdata", "reference.json")} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			got, err := loadAndPlan(path)
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got plan %+v\nwant the reference workload's %+v", got, want)
			}
		})
	}
}

// TestCustomExampleOverrides checks that a file overrides a built-in GPU
// field by field and adds its own GPU and model.
func TestCustomExampleOverrides(t *testing.T) {
	in, err := capacity.LoadConfig(filepath.Join(examplesDir, "custom.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	byModel := map[string]capacity.Deployment{}
	for _, w := range in.Workloads {
		byModel[w.Deployment.Model.Name] = w.Deployment
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"H100 price overridden", byModel["llama-8b"].GPU.PricePerHour, 4.5},
		{"H100 memory kept from the built-in", byModel["llama-8b"].GPU.MemoryBytes, capacity.H100SXM.MemoryBytes},
		{"custom GPU memory in GiB", byModel["llama-70b"].GPU.MemoryBytes, 47 * capacity.GiB},
		{"custom GPU owned at no price", byModel["llama-70b"].GPU.PricePerHour, 0.0},
		{"custom model served name", byModel["mistral-7b"].Model.ServedName, "mistralai/Mistral-7B-Instruct-v0.3"},
		{"custom model params in billions", byModel["mistral-7b"].Model.Params, 7.25e9},
		{"custom model KV bytes per token", byModel["mistral-7b"].Model.KVBytesPerToken(), 2.0 * 32 * 8 * 128 * 2},
		{"on-prem GPUs", in.Fleet.OnPrem, []capacity.OnPremGPUs{{GPU: "RTX-6000-Ada", Count: 8}}},
		{"defaults left to the planner", in.Fleet.HoursPerMonth, 0.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

// TestBadConfigs is the expected-error table of testdata/bad: each file is
// rejected with its class of error and a message that names the problem.
func TestBadConfigs(t *testing.T) {
	tests := []struct {
		file    string
		wantErr error
		mention string
	}{
		{"unknown_field.yaml", capacity.ErrConfig, "peak_stream"},
		{"unknown_model.yaml", capacity.ErrConfig, `"llama-9b"`},
		{"unknown_gpu.yaml", capacity.ErrConfig, `"L40"`},
		{"gpu_without_price.yaml", capacity.ErrConfig, "price_usd_per_hour is required"},
		{"negative_memory.yaml", capacity.ErrConfig, "memory"},
		{"model_missing_layers.yaml", capacity.ErrConfig, "layers"},
		{"onprem_unknown_gpu.yaml", capacity.ErrConfig, `"L4OS"`},
		{"empty.yaml", capacity.ErrConfig, "empty"},
		{"not_yaml.yaml", capacity.ErrConfig, "yaml"},
		{"utilisation_above_one.yaml", capacity.ErrInvalidInput, "utilisation"},
		{"no_planned_streams.yaml", capacity.ErrInvalidInput, "planned_streams_per_replica"},
		{"too_many_planned_streams.yaml", capacity.ErrPlannedStreamsDoNotFit, "holds 90"},
		{"max_model_len_too_long.yaml", capacity.ErrMaxModelLenTooLong, "holds 185488"},
		{"does_not_fit.yaml", capacity.ErrDoesNotFit, "qwen-32b"},
		{"two_workloads_one_model.yaml", capacity.ErrInvalidInput, "two workloads"},
		{"no_workloads.yaml", capacity.ErrInvalidInput, "no workloads"},
		{"negative_onprem.yaml", capacity.ErrInvalidInput, "count"},
		{"negative_queue_limit.yaml", capacity.ErrInvalidInput, "queue_limit_seconds"},
	}
	listed := map[string]bool{}
	for _, tt := range tests {
		listed[tt.file] = true
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "bad", "*.yaml"))
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("testdata/bad/%s has no expected error in the table", filepath.Base(f))
		}
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := loadAndPlan(filepath.Join("testdata", "bad", tt.file))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("got message %q, want it to name %q", err, tt.mention)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := capacity.LoadConfig(filepath.Join("testdata", "bad", "no_such_file.yaml"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("got %v, want %v", err, fs.ErrNotExist)
		}
	})
}
