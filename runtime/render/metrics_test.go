package render

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// exporters are the packages whose source names every metric the
// manifests may query: the platform's own (gateway, orchestrator and its
// cluster watch) and vLLM's, as the engine simulator exports them under
// vLLM's names.
var exporters = []string{"gateway", "orchestrator", "clusterwatch", "enginesim"}

// metricName matches a platform or vLLM metric name in a query or in Go
// source.
var metricName = regexp.MustCompile(`\b(?:llmplat_|vllm:)[a-z_:]+`)

// exported returns every metric name the exporters' source mentions.
func exported(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, pkg := range exporters {
		paths, err := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		if err != nil || len(paths) == 0 {
			t.Fatalf("no source in %s: %v", pkg, err)
		}
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, metricName.FindAllString(string(src), -1)...)
		}
	}
	return names
}

// TestQueriedMetricsExist: every platform and vLLM metric that the
// ScaledObjects, alerts and dashboard query is one the code exports (a
// histogram by its base name), so a renamed metric cannot leave a trigger
// or an alert reading nothing.
func TestQueriedMetricsExist(t *testing.T) {
	files, err := Render(example(t))
	if err != nil {
		t.Fatal(err)
	}
	have := exported(t)
	checked := 0
	for _, f := range files {
		for _, name := range metricName.FindAllString(string(f.Data), -1) {
			if strings.HasSuffix(name, "_") { // a prefix in a regular expression (the engine's preStop)
				continue
			}
			checked++
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if !slices.Contains(have, name) && !slices.Contains(have, base) {
				t.Errorf("%s queries %s, which no exporter defines", f.Name, name)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d metric names, want the triggers', alerts' and dashboard's (20 or more)", checked)
	}
}
