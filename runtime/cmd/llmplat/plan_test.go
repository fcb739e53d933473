package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// customExample is the shipped custom plan file.
var customExample = filepath.Join("..", "..", "..", "examples", "capacity", "custom.yaml")

// wantTable renders the planner's own table for an input.
func wantTable(t *testing.T, in capacity.Input) string {
	t.Helper()
	res, err := capacity.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := capacity.WriteTable(&b, res); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRunPlanOutput(t *testing.T) {
	custom, err := capacity.LoadConfig(customExample)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no flags plans the reference workload", nil, wantTable(t, capacity.ReferenceInput())},
		{"--format table is the default", []string{"--format", "table"}, wantTable(t, capacity.ReferenceInput())},
		{"--config plans the file", []string{"--config", customExample}, wantTable(t, custom)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := runPlan(context.Background(), tt.args, &out); err != nil {
				t.Fatalf("runPlan(%q) error: %v", tt.args, err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestRunPlanJSON checks that --format json parses back into the planner's
// result for the reference workload.
func TestRunPlanJSON(t *testing.T) {
	want, err := capacity.Plan(capacity.ReferenceInput())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runPlan(context.Background(), []string{"--format", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var got capacity.Result
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decode plan json: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestRunPlanErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error
	}{
		{"unknown format", []string{"--format", "xml"}, errUnknownFormat},
		{"missing config file", []string{"--config", filepath.Join("testdata", "no_such_plan.yaml")}, fs.ErrNotExist},
		{"bad config file", []string{"--config", filepath.Join("..", "..", "capacity", "testdata", "bad", "unknown_field.yaml")}, capacity.ErrConfig},
		{"help", []string{"-h"}, flag.ErrHelp},
		{"stray argument", []string{"extra"}, errUnexpectedArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if got := runPlan(context.Background(), tt.args, &out); !errors.Is(got, tt.wantErr) {
				t.Errorf("got %v, want %v", got, tt.wantErr)
			}
		})
	}
}

func TestPlanRegistered(t *testing.T) {
	if _, ok := commands["plan"]; !ok {
		t.Error("plan is not a registered command")
	}
}
