package loadgen_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/loadgen"
)

// TestSummarizeJudgesEveryGoal: the output passes through whole, and each
// goal gets one line with every run's ratio and its verdict: met when
// every run met it, missed when one did not, not measured when its
// benchmark did not run or its floor added nothing.
func TestSummarizeJudgesEveryGoal(t *testing.T) {
	goals := []loadgen.Goal{
		{Benchmark: "BenchmarkA/processes", Metric: "x-ratio", What: "x", Bound: 1.5},
		{Benchmark: "BenchmarkA/processes", Metric: "y-ratio", What: "y", Bound: 1.5},
		{Benchmark: "BenchmarkB", Metric: "cloud/proxy", What: "z", Bound: 0.5, AtLeast: true},
		{Benchmark: "BenchmarkB", Metric: "platform/proxy", What: "w", Bound: 0.35, AtLeast: true},
		{Benchmark: "BenchmarkC", Metric: "v-ratio", What: "v", Bound: 2},
		{Benchmark: "BenchmarkA/processes", Metric: "u-ratio", What: "u", Bound: 2},
	}
	out := `goos: linux
BenchmarkA/processes-2         	       1	         0 ns/op	         1.20 x-ratio	         1.40 y-ratio	0 u-ratio
--- BENCH: BenchmarkA/processes-2
    overhead_test.go:1: a log line 2.0 x-ratio
BenchmarkA/processes-2         	       1	         0 ns/op	         1.49 x-ratio	         1.60 y-ratio	0 u-ratio
BenchmarkA/one-process-2       	       1	         0 ns/op	         9.00 x-ratio
BenchmarkB-2   	       1	         0 ns/op	      4000 proxy-req/s	0.51 cloud/proxy	0.30 platform/proxy	  123 B/op	  4 allocs/op
ok  	example/loadgen	12.3s
`
	var w bytes.Buffer
	failed, err := loadgen.Summarize(strings.NewReader(out), &w, goals)
	if err != nil {
		t.Fatal(err)
	}
	if failed {
		t.Error("a passing run reported as failed")
	}
	got := w.String()
	if !strings.HasPrefix(got, out) {
		t.Errorf("the output did not pass through whole:\n%s", got)
	}
	lines := strings.Split(strings.TrimSpace(strings.TrimPrefix(got, out)), "\n")
	want := []struct{ verdict, runs string }{
		{"met", "1.20, 1.49"},
		{"missed", "1.40, 1.60"},
		{"met", "0.51"},
		{"missed", "0.30"},
		{"not measured", "-"},
		{"not measured", "0.00, 0.00"},
	}
	if len(lines) != len(want)+1 {
		t.Fatalf("got %d summary lines, want %d:\n%s", len(lines), len(want)+1, strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], "goal "+w.verdict+" ") || !strings.Contains(lines[i], " "+w.runs+" ") {
			t.Errorf("goal %s: got %q, want %s with runs %s", goals[i].What, lines[i], w.verdict, w.runs)
		}
	}
	if last := lines[len(want)]; last != "goals: 2 met, 2 missed, 2 not measured" {
		t.Errorf("got the last line %q", last)
	}
}

// TestSummarizeReportsAFailure: a failing package or benchmark fails the
// summary, whose exit status is the pipeline's.
func TestSummarizeReportsAFailure(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		failed    bool
	}{
		{"pass", "PASS\nok  \tpkg\t1.0s\n", false},
		{"failed package", "--- FAIL: BenchmarkX\nFAIL\nFAIL\tpkg\t1.0s\n", true},
		{"build failure", "FAIL\tpkg [build failed]\n", true},
		{"failed sub-benchmark", "    --- FAIL: BenchmarkX/sub\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failed, err := loadgen.Summarize(strings.NewReader(tc.out), &bytes.Buffer{}, loadgen.Goals)
			if err != nil {
				t.Fatal(err)
			}
			if failed != tc.failed {
				t.Errorf("got failed %v, want %v", failed, tc.failed)
			}
		})
	}
}

// TestGoalsAreIssue34s: the goals name the benchmarks' own metrics, the
// overhead ones in the benchmark whose parts run in processes of their
// own.
func TestGoalsAreIssue34s(t *testing.T) {
	metrics := map[string]bool{}
	for _, c := range overheadComparisons {
		for _, fig := range []string{"ttft-p50-added-ratio", "ttft-p99-added-ratio", "itl-p99-ratio"} {
			metrics["BenchmarkPlatformOverhead/processes "+c.metric(fig)] = true
		}
	}
	for _, m := range []string{"platform/proxy", "4-teams/proxy", "cloud/proxy", "cloud-4-teams/proxy"} {
		metrics["BenchmarkThroughput "+m] = true
	}
	for _, g := range loadgen.Goals {
		if !metrics[g.Benchmark+" "+g.Metric] {
			t.Errorf("goal %q: %s reports no %s", g.What, g.Benchmark, g.Metric)
		}
	}
	if len(loadgen.Goals) != 10 {
		t.Errorf("got %d goals, want issue 34's ten", len(loadgen.Goals))
	}
}
