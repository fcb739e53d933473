package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/llmplat/llmplat/runtime/capacity"
)

func init() {
	register("plan", "size GPUs, vLLM flags and cost from the KV-cache arithmetic", runPlan)
}

// Output formats of plan.
const (
	formatTable = "table"
	formatJSON  = "json"
)

// Errors of the plan command line.
var (
	// errUnknownFormat is returned for a --format other than table or json.
	errUnknownFormat = errors.New("unknown format")
	// errUnexpectedArgs is returned for arguments after the flags.
	errUnexpectedArgs = errors.New("unexpected arguments")
)

// runPlan plans the seed's scenario, or the one in --config, and writes it
// as a table or as JSON.
func runPlan(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("plan")
	fs.SetOutput(stdout)
	config := fs.String("config", "", "YAML or JSON file with models, GPUs, workloads and fleet (default: the seed's scenario)")
	format := fs.String("format", formatTable, "output format: table or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w %q", errUnexpectedArgs, fs.Args())
	}
	if *format != formatTable && *format != formatJSON {
		return fmt.Errorf("%w %q: want %s or %s", errUnknownFormat, *format, formatTable, formatJSON)
	}
	in := capacity.SeedInput()
	if *config != "" {
		var err error
		if in, err = capacity.LoadConfig(*config); err != nil {
			return err
		}
	}
	res, err := capacity.Plan(in)
	if err != nil {
		return err
	}
	if *format == formatJSON {
		return capacity.WriteJSON(stdout, res)
	}
	return capacity.WriteTable(stdout, res)
}
