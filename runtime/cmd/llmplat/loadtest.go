package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/llmplat/llmplat/runtime/loadgen"
)

func init() {
	register("loadtest", "drive an OpenAI-compatible endpoint with streamed chat completions and report TTFT, ITL, tokens/s and errors", runLoadtest)
}

// The environment an OpenAI SDK reads: the loadtest reads the same.
var (
	envOpenAIBase = envVar{"OPENAI_BASE_URL", "the API's base URL (…/v1), the default of -base-url"}
	envOpenAIKey  = envVar{"OPENAI_API_KEY", "the API key"}
)

func runLoadtest(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("loadtest", envOpenAIBase, envOpenAIKey)
	base := fs.String("base-url", os.Getenv(envOpenAIBase.name), "the API's base URL, with or without /v1 (env OPENAI_BASE_URL)")
	models := fs.String("models", "llama-8b", "the model mix: name:weight,… (for example llama-8b:8,qwen-32b:1.5,llama-70b:0.5)")
	rate := fs.Float64("rate", 0, "arrivals per second (Poisson) for -duration")
	duration := fs.Duration("duration", 30*time.Second, "how long arrivals go on with -rate")
	burst := fs.Int("burst", 0, "send this many requests at once instead of a rate")
	concurrency := fs.Int("concurrency", 0, "most requests in flight; 0 is no cap")
	promptTokens := fs.Int("prompt-tokens", 200, "each prompt's length, about, in tokens")
	maxTokens := fs.Int("max-tokens", 100, "each answer's cap")
	seed := fs.Uint64("seed", 1, "the arrivals' and the mix's random seed")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *base == "" {
		return errors.New("-base-url (or OPENAI_BASE_URL) is required")
	}
	if (*rate > 0) == (*burst > 0) {
		return errors.New("give -rate (with -duration) or -burst")
	}
	mix, err := loadgen.ParseMix(*models)
	if err != nil {
		return err
	}
	plan := loadgen.Plan{BaseURL: *base, Key: os.Getenv(envOpenAIKey.name), Models: mix, Rate: *rate, Duration: *duration,
		Burst: *burst, Concurrency: *concurrency, PromptTokens: *promptTokens, MaxTokens: *maxTokens, Seed: *seed}
	if !*quiet {
		// A progress line on stderr, rewritten in place.
		plan.Progress = func(p loadgen.Progress) {
			fmt.Fprintf(os.Stderr, "\r%5.0fs  sent %d  in flight %d  done %d  errors %d  TTFT p50 %v   ",
				p.Elapsed.Seconds(), p.Sent, p.InFlight, p.Done, p.Errs, p.TTFT50.Round(time.Millisecond))
		}
	}
	rep, err := loadgen.Load(ctx, plan)
	if !*quiet {
		fmt.Fprintln(os.Stderr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	writeLoadReport(stdout, rep)
	return nil
}

// writeLoadReport prints the report as a table.
func writeLoadReport(w io.Writer, rep loadgen.Report) {
	fmt.Fprintf(w, "%-12s %8s %8s %9s %9s %9s %8s %8s %10s  %s\n",
		"model", "requests", "ok", "ttft p50", "ttft p90", "ttft p99", "itl p50", "itl p99", "tokens/s", "errors")
	names := make([]string, 0, len(rep.Models))
	for n := range rep.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	row := func(name string, s *loadgen.Summary) {
		errs := make([]string, 0, len(s.Errors))
		for k, v := range s.Errors {
			errs = append(errs, fmt.Sprintf("%s×%d", k, v))
		}
		sort.Strings(errs)
		fmt.Fprintf(w, "%-12s %8d %8d %7.0fms %7.0fms %7.0fms %6.0fms %6.0fms %10.0f  %s\n", name, s.Requests, s.OK,
			s.TTFT.P50, s.TTFT.P90, s.TTFT.P99, s.ITL.P50, s.ITL.P99, s.TokensPerSecond, strings.Join(errs, " "))
	}
	for _, n := range names {
		row(n, rep.Models[n])
	}
	row("all", rep.Overall)
	fmt.Fprintf(w, "wall time %.1fs\n", rep.WallS)
}
