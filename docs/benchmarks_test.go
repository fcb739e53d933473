package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// benchmarksFile is the page of current benchmark figures, beside this
// test.
const benchmarksFile = "benchmarks.md"

var (
	benchName = regexp.MustCompile(`\bBenchmark[A-Z][A-Za-z0-9_]*`)
	pkgArg    = regexp.MustCompile(`\./((?:runtime|provider|modules)/[A-Za-z0-9_./-]*?)/?(?:[\s` + "`" + `]|$)`)
)

// TestBenchmarksPageNamesEveryBenchmark: the benchmarks page names every
// benchmark of the module — with its current figure, or in its list of
// benchmarks with none — and names none that does not exist, and every
// package its commands run exists.
func TestBenchmarksPageNamesEveryBenchmark(t *testing.T) {
	b, err := os.ReadFile(benchmarksFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := scanTree(t)
	for _, bad := range checkBenchmarks(string(b), tr.tests) {
		t.Error(bad)
	}
}

// TestBenchmarkCheckFindsPlantedNames: a benchmark left off the page, one
// the page names that does not exist, and a command's missing package are
// each reported.
func TestBenchmarkCheckFindsPlantedNames(t *testing.T) {
	tests := map[string]map[string]bool{
		"BenchmarkKept": {"runtime/quota": true},
		"BenchmarkLeft": {"runtime/quota": true},
	}
	page := "`BenchmarkKept` and `BenchmarkGone`: `go test -bench Kept ./runtime/nowhere/`"
	got := checkBenchmarks(page, tests)
	want := []string{
		"benchmarks.md names BenchmarkGone, which no test file defines",
		"benchmarks.md runs ./runtime/nowhere, which does not exist",
		"runtime/quota's BenchmarkLeft is not on benchmarks.md: give its current figure, or list it with the benchmarks that have none",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("checkBenchmarks found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkBenchmarks returns what the page gets wrong of tests (every test
// function of the module, by name, with the packages that define it).
func checkBenchmarks(page string, tests map[string]map[string]bool) []string {
	var bad []string
	named := map[string]bool{}
	for _, n := range benchName.FindAllString(page, -1) {
		named[n] = true
	}
	for n := range named {
		if len(tests[n]) == 0 {
			bad = append(bad, fmt.Sprintf("%s names %s, which no test file defines", benchmarksFile, n))
		}
	}
	for n, dirs := range tests {
		if !strings.HasPrefix(n, "Benchmark") || named[n] {
			continue
		}
		for d := range dirs {
			bad = append(bad, fmt.Sprintf("%s's %s is not on %s: give its current figure, or list it with the benchmarks that have none",
				d, n, benchmarksFile))
		}
	}
	for _, m := range pkgArg.FindAllStringSubmatch(page, -1) {
		if strings.Contains(m[1], "...") {
			continue // a pattern, not a package
		}
		if fi, err := os.Stat(filepath.Join(moduleRoot, filepath.FromSlash(m[1]))); err != nil || !fi.IsDir() {
			bad = append(bad, fmt.Sprintf("%s runs ./%s, which does not exist", benchmarksFile, m[1]))
		}
	}
	sort.Strings(bad)
	return bad
}
