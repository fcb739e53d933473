package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/costreport"
	"github.com/llmplat/llmplat/runtime/store"
)

func init() {
	register("report", "GPU-hours, cost per million tokens, idle GPU time and ledger drift per model", runReport)
}

// Errors of the report command line.
var (
	// errReportFlagMissing is returned when a required flag is not given.
	errReportFlagMissing = errors.New("missing flag")
	// errReportFlagConflict is returned for flags that exclude each other.
	errReportFlagConflict = errors.New("conflicting flags")
)

// reportSnapshots collects repeated --metrics-between files in order.
type reportSnapshots []string

func (s *reportSnapshots) String() string { return strings.Join(*s, ",") }

func (s *reportSnapshots) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// runReport reads the ledger, and GPU time from node events or Prometheus,
// and writes the cost and drift report as a table or as JSON.
func runReport(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := newFlagSet("report")
	fs.SetOutput(stdout)
	dsn := fs.String("db", "", "database: postgres://… or sqlite:<path> (required)")
	from := fs.String("from", "", "window start, RFC 3339 or a UTC date such as 2026-03-02 (required)")
	to := fs.String("to", "", "window end, exclusive (required)")
	prom := fs.String("prometheus", "", "Prometheus base URL: GPU time and engine tokens from it instead of node events")
	start := fs.String("metrics-start", "", "vLLM /metrics snapshot taken at the window's start, for drift")
	end := fs.String("metrics-end", "", "vLLM /metrics snapshot taken at the window's end, for drift")
	var between reportSnapshots
	fs.Var(&between, "metrics-between", "a /metrics snapshot taken inside the window (repeat, in time order)")
	config := fs.String("config", "", "capacity config file with GPU prices and GPUs per replica (default: the reference workload)")
	price := fs.Float64("price-usd-per-gpu-hour", 0, "price of every GPU-hour (default: each GPU kind's capacity profile)")
	target := fs.Float64("drift-target", costreport.DefaultDriftTarget, "largest |drift| that passes (the required 0.1 %)")
	format := fs.String("format", formatTable, "output format: table or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := checkReportFlags(fs.Args(), set, *format); err != nil {
		return err
	}
	w, err := reportWindow(*from, *to)
	if err != nil {
		return err
	}
	profiles, err := reportProfiles(*config, set["price-usd-per-gpu-hour"], *price)
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	opts := costreport.Options{Window: w, DriftTarget: *target, GPU: costreport.NodeEvents{DB: db, Profiles: profiles}}
	switch {
	case *prom != "":
		src := costreport.Prometheus{Client: &costreport.PromClient{BaseURL: *prom, HTTP: &http.Client{}}, Profiles: profiles}
		opts.GPU, opts.Engine = src, src
	case *start != "":
		paths := append(append([]string{*start}, between...), *end)
		opts.Engine = costreport.Snapshots{Paths: paths}
	}
	r, err := costreport.Generate(ctx, db, opts)
	if err != nil {
		return err
	}
	if *format == formatJSON {
		return costreport.WriteJSON(stdout, r)
	}
	return costreport.WriteTable(stdout, r)
}

// checkReportFlags checks which flags were set against each other.
func checkReportFlags(rest []string, set map[string]bool, format string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("%w %q", errUnexpectedArgs, rest)
	case format != formatTable && format != formatJSON:
		return fmt.Errorf("%w %q: want %s or %s", errUnknownFormat, format, formatTable, formatJSON)
	}
	for _, name := range []string{"db", "from", "to"} {
		if !set[name] {
			return fmt.Errorf("%w: --%s", errReportFlagMissing, name)
		}
	}
	snapshots := set["metrics-start"] || set["metrics-end"] || set["metrics-between"]
	switch {
	case set["prometheus"] && snapshots:
		return fmt.Errorf("%w: --prometheus gives engine tokens; leave out the --metrics-* snapshots", errReportFlagConflict)
	case snapshots && !(set["metrics-start"] && set["metrics-end"]):
		return fmt.Errorf("%w: drift from snapshots needs both --metrics-start and --metrics-end", errReportFlagMissing)
	}
	return nil
}

// reportWindow parses --from and --to.
func reportWindow(from, to string) (costreport.Window, error) {
	f, err := costreport.ParseTime(from)
	if err != nil {
		return costreport.Window{}, fmt.Errorf("--from: %w", err)
	}
	t, err := costreport.ParseTime(to)
	if err != nil {
		return costreport.Window{}, fmt.Errorf("--to: %w", err)
	}
	w := costreport.Window{From: f, To: t}
	return w, w.Validate()
}

// reportProfiles loads the capacity profiles and applies a given price.
func reportProfiles(config string, priced bool, price float64) (costreport.Profiles, error) {
	in := capacity.ReferenceInput()
	if config != "" {
		var err error
		if in, err = capacity.LoadConfig(config); err != nil {
			return costreport.Profiles{}, err
		}
	}
	p := costreport.NewProfiles(in)
	if priced {
		if price < 0 {
			return costreport.Profiles{}, fmt.Errorf("--price-usd-per-gpu-hour must not be negative, got %g", price)
		}
		p = p.WithPrice(price)
	}
	return p, nil
}
