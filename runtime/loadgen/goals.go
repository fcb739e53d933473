package loadgen

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Goal is a ratio a benchmark reports and the bound the project sets on
// it: a benchmark that misses it has regressed (docs/benchmarks.md).
type Goal struct {
	// Benchmark is the benchmark's full name, without the -GOMAXPROCS
	// suffix go test adds.
	Benchmark string
	// Metric is the unit the benchmark reports the ratio under.
	Metric string
	// What says what the ratio compares.
	What string
	// Bound is the goal; AtLeast says whether the ratio must reach it
	// (throughput) or stay under it (added time).
	Bound   float64
	AtLeast bool
}

// The benchmarks the goals are measured by.
const (
	overheadBench   = "BenchmarkPlatformOverhead/processes"
	throughputBench = "BenchmarkThroughput"
)

// Goals are the performance goals of issue 34: each path's added time to
// first token against the floor with as many relays (the socket path has
// two, the gateway's process and the node agent's; the cloud path one),
// at p50 and p99; the gap between tokens; throughput against a bare proxy.
// The added-time goals are measured with every part in a process of its
// own, as deployed.
var Goals = []Goal{
	{overheadBench, "ttft-p50-added-ratio-2relays", "socket path added TTFT p50 / two-relay floor", 1.5, false},
	{overheadBench, "ttft-p99-added-ratio-2relays", "socket path added TTFT p99 / two-relay floor", 1.5, false},
	{overheadBench, "cloud-ttft-p50-added-ratio", "cloud path added TTFT p50 / one-proxy floor", 1.5, false},
	{overheadBench, "cloud-ttft-p99-added-ratio", "cloud path added TTFT p99 / one-proxy floor", 1.5, false},
	{overheadBench, "itl-p99-ratio-2relays", "socket path ITL p99 / two-relay floor", 1.1, false},
	{overheadBench, "cloud-itl-p99-ratio", "cloud path ITL p99 / one-proxy floor", 1.1, false},
	{throughputBench, "cloud/proxy", "cloud path throughput / proxy, one team", 0.5, true},
	{throughputBench, "cloud-4-teams/proxy", "cloud path throughput / proxy, four teams", 0.5, true},
	{throughputBench, "platform/proxy", "socket path throughput / proxy, one team", 0.35, true},
	{throughputBench, "4-teams/proxy", "socket path throughput / proxy, four teams", 0.35, true},
}

// Summarize copies go test's benchmark output from r to w as it comes,
// then writes one line per goal: the ratio each run of its benchmark
// reported, and whether every one met the goal (a goal whose benchmark
// did not run is "not measured"; a ratio of 0 or less is one the
// benchmark could not measure, its floor having added nothing), and a
// last line counting them. It reports whether the output held a failure
// (a line starting with FAIL or --- FAIL), for the caller's exit status.
func Summarize(r io.Reader, w io.Writer, goals []Goal) (failed bool, err error) {
	seen := map[string][]float64{} // by benchmark and metric
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxOutputLine)
	for sc.Scan() {
		line := sc.Text()
		if _, err := fmt.Fprintln(w, line); err != nil {
			return failed, err
		}
		if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(strings.TrimSpace(line), "--- FAIL") {
			failed = true
		}
		name, metrics, ok := parseBenchLine(line)
		if !ok {
			continue
		}
		for unit, v := range metrics {
			seen[name+" "+unit] = append(seen[name+" "+unit], v)
		}
	}
	if err := sc.Err(); err != nil {
		return failed, fmt.Errorf("read benchmark output: %w", err)
	}
	var met, missed, unmeasured int
	for _, g := range goals {
		vals := seen[g.Benchmark+" "+g.Metric]
		verdict := g.verdict(vals)
		switch verdict {
		case "met":
			met++
		case "missed":
			missed++
		default:
			unmeasured++
		}
		if _, err := fmt.Fprintf(w, "goal %-12s %-46s %-14s %s %g  (%s %s)\n", verdict, g.What, formatRuns(vals),
			map[bool]string{true: "≥", false: "≤"}[g.AtLeast], g.Bound, g.Benchmark, g.Metric); err != nil {
			return failed, err
		}
	}
	_, err = fmt.Fprintf(w, "goals: %d met, %d missed, %d not measured\n", met, missed, unmeasured)
	return failed, err
}

// maxOutputLine bounds one line of go test's output: a benchmark's log
// line is short, a panic's stack is many short lines.
const maxOutputLine = 1 << 20

// verdict is "met" when every run met the goal, "missed" when one did not,
// and "not measured" when no run reported a ratio above zero.
func (g Goal) verdict(vals []float64) string {
	measured := false
	for _, v := range vals {
		if v <= 0 {
			continue
		}
		measured = true
		if g.AtLeast && v < g.Bound || !g.AtLeast && v > g.Bound {
			return "missed"
		}
	}
	if !measured {
		return "not measured"
	}
	return "met"
}

// formatRuns lists the runs' ratios, "-" for none.
func formatRuns(vals []float64) string {
	if len(vals) == 0 {
		return "-"
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strings.Join(parts, ", ")
}

// parseBenchLine reads one result line of go test -bench,
// "BenchmarkName/sub-2  1  123 ns/op  1.5 some-ratio ...": the name without
// its -GOMAXPROCS suffix and every value by its unit.
func parseBenchLine(line string) (string, map[string]float64, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
		return "", nil, false
	}
	if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
		return "", nil, false
	}
	name := f[0]
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.ParseUint(name[i+1:], 10, 32); err == nil {
			name = name[:i]
		}
	}
	metrics := make(map[string]float64, (len(f)-2)/2)
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false
		}
		metrics[f[i+1]] = v
	}
	return name, metrics, true
}
