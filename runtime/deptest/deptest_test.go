package deptest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/llmplat/llmplat/"

// layers lists every package of the module, lowest first. A package may
// import only packages of a lower layer: the arrows point down.
var layers = [][]string{
	// 0: primitives and wire formats; they import nothing of ours.
	{"runtime/openai", "runtime/jsonscan", "runtime/strictjson", "runtime/hoptrace", "runtime/httpserve", "runtime/drain",
		"runtime/capacity", "runtime/store", "runtime/quota", "runtime/registry",
		"runtime/routing", "runtime/wsconn", "runtime/modelsync", "runtime/enginemetrics",
		"runtime/k8sschema", "runtime/rdssecret", "runtime/adminrules", "runtime/coldstart", "runtime/credential", "runtime/backoff",
		"runtime/adminwire", "templates", "modules/eks-llm"},
	// 1: parsing, protocols and authentication built on them.
	{"runtime/jsonvariant", "runtime/urlguard", "runtime/tokens", "runtime/nodeproto",
		"runtime/auth", "runtime/adminclient", "runtime/proxyheader"},
	// 2: the ledger, the cost report and the manifests; dispatch, the
	// seam between gateway and orchestrator (the job's envelope, the
	// typed event with the stand-in tokenizer's count of its text).
	{"runtime/ledger", "runtime/render", "runtime/costreport", "runtime/agentflags", "runtime/dispatch"},
	// 3: what is built on the ledger; the two transports of the seam: the
	// engine client, which parses engine events, and the internal hop.
	{"runtime/settlelog", "runtime/admin", "runtime/engineclient", "runtime/internalhop"},
	// 4: the processes' parts that talk to engines and clients.
	{"runtime/gateway", "runtime/console", "runtime/nodeagent", "runtime/enginesim", "runtime/loadgen"},
	// 5: the orchestrator (it reads node tokens through the admin store).
	{"runtime/orchestrator"},
	// 6: the Kubernetes controller, which feeds cloud engines to it.
	{"runtime/clusterwatch"},
	// 7: the processes' wiring: the gateway's and an orchestrator replica's.
	{"runtime/frontdoor", "runtime/controlplane"},
	// 8: local mode and the Terraform provider.
	{"runtime/devmode", "provider"},
	// 9: the binaries and tools.
	{"runtime/cmd/llmplat", "provider/cmd/terraform-provider-llmplat", "runtime/k8sschema/cmd/modules", "runtime/loadgen/cmd/benchgoals"},
}

// harnesses are imported only by tests and by other harnesses. They may
// import anything of ours.
var harnesses = map[string]bool{
	"runtime/testenv": true, "runtime/kubetest": true, "runtime/platformtest": true,
	"runtime/golden": true, "runtime/costreport/costreporttest": true, "runtime/chaos": true,
	"runtime/deptest": true, "runtime/hostilebody": true, "runtime/twin": true,
	"docs": true,
}

// forbidden lists, per package, modules its whole dependency tree must not
// contain, and why.
var forbidden = map[string]map[string]string{
	"runtime/nodeagent": {
		"github.com/jackc/pgx":          "the node agent runs on-premises and never reaches a database",
		"github.com/redis/go-redis":     "the node agent never reaches Redis",
		"modernc.org/sqlite":            "the node agent keeps no database",
		"github.com/gin-gonic/gin":      "the node agent serves no HTTP API of ours",
		module + "runtime/store":        "the node agent never reaches a database",
		module + "runtime/ledger":       "money moves only in the gateway",
		module + "runtime/orchestrator": "the agent speaks to the orchestrator only over the node protocol",
	},
	"runtime/gateway": {
		module + "runtime/engineclient": "the gateway relays bytes and the typed tail the orchestrator read: it never parses an engine event",
	},
	"runtime/internalhop": {
		module + "runtime/engineclient": "the internal hop carries events as the orchestrator read them: the gateway's side parses none",
	},
	"runtime/adminrules": {
		"github.com/gin-gonic/gin": "the provider links the admin API's rules, never its server",
		"github.com/jackc/pgx":     "the provider links the admin API's rules, never its store",
		"modernc.org/sqlite":       "the provider links the admin API's rules, never its store",
	},
	"provider/cmd/terraform-provider-llmplat": {
		"github.com/gin-gonic/gin":      "the provider is a client of the admin API, never its server",
		"github.com/jackc/pgx":          "the provider reaches the platform only through the admin API",
		"modernc.org/sqlite":            "the provider keeps no database",
		"github.com/redis/go-redis":     "the provider never reaches Redis",
		module + "runtime/admin":        "the provider links the admin API's client (runtime/adminclient), never its server",
		module + "runtime/ledger":       "money moves only in the gateway",
		module + "runtime/store":        "the provider reaches the platform only through the admin API",
		module + "runtime/gateway":      "the provider serves no traffic",
		module + "runtime/orchestrator": "the provider schedules nothing",
	},
	"runtime/agentflags": {
		"github.com/gin-gonic/gin": "the provider links the agent's flag rules, never a server",
		"github.com/jackc/pgx":     "the provider links the agent's flag rules, never a store",
		"modernc.org/sqlite":       "the provider links the agent's flag rules, never a store",
	},
}

// pkg is one package of the import graph.
type pkg struct {
	path     string
	standard bool
	imports  []string
}

// graph reads the import graph of every package of the module (non-test
// imports: what ships) and of their dependencies.
func graph(t *testing.T, patterns ...string) map[string]pkg {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{join .Imports \",\"}}"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := map[string]pkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 3)
		if len(f) < 2 {
			continue
		}
		p := pkg{path: f[0], standard: f[1] == "true"}
		if len(f) == 3 && f[2] != "" {
			p.imports = strings.Split(f[2], ",")
		}
		g[p.path] = p
	}
	return g
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = up
	}
}

// checkLayers returns every import of ours that does not point to a lower
// layer, every package of ours that has no layer, and every import of a
// harness by a package that ships.
func checkLayers(g map[string]pkg, layers [][]string, harnesses map[string]bool) []string {
	layer := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			layer[p] = i
		}
	}
	var bad []string
	for _, p := range g {
		from, ok := strings.CutPrefix(p.path, module)
		if !ok {
			continue
		}
		if harnesses[from] {
			continue
		}
		lf, ok := layer[from]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s has no layer: add it to deptest's layers", from))
			continue
		}
		for _, imp := range p.imports {
			to, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if harnesses[to] {
				bad = append(bad, fmt.Sprintf("%s imports the test harness %s", from, to))
				continue
			}
			lt, ok := layer[to]
			if !ok {
				continue // reported as a package of its own
			}
			if lt >= lf {
				bad = append(bad, fmt.Sprintf("%s (layer %d) imports %s (layer %d): an arrow must point to a lower layer", from, lf, to, lt))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// checkForbidden returns every forbidden module in the dependency tree of
// root, with the chain of imports that brings it in.
func checkForbidden(g map[string]pkg, root string, rules map[string]string) []string {
	parent := map[string]string{root: ""}
	queue := []string{root}
	var bad []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for prefix, why := range rules {
			if p == prefix || strings.HasPrefix(p, prefix+"/") {
				chain := []string{p}
				for q := parent[p]; q != ""; q = parent[q] {
					chain = append([]string{q}, chain...)
				}
				bad = append(bad, fmt.Sprintf("%s links %s (%s): %s", root, prefix, why, strings.Join(chain, " → ")))
			}
		}
		for _, imp := range g[p].imports {
			if _, seen := parent[imp]; !seen {
				parent[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	sort.Strings(bad)
	return bad
}

func TestImportsPointDown(t *testing.T) {
	g := graph(t, "./...")
	for _, bad := range checkLayers(g, layers, harnesses) {
		t.Error(bad)
	}
	// Every listed package exists, so the table cannot rot.
	for _, l := range layers {
		for _, p := range l {
			if _, ok := g[module+p]; !ok {
				t.Errorf("deptest's layers name %s, which is not a package of the module", p)
			}
		}
	}
	for p := range harnesses {
		if _, ok := g[module+p]; !ok {
			t.Errorf("deptest's harnesses name %s, which is not a package of the module", p)
		}
	}
}

func TestForbiddenDependencies(t *testing.T) {
	for root, rules := range forbidden {
		g := graph(t, "./"+root)
		for _, bad := range checkForbidden(g, module+root, rules) {
			t.Error(bad)
		}
	}
}

// The checks bite: a planted upward import, a package with no layer, a
// shipped package importing a harness and a forbidden module reached
// through another package are each reported.
func TestChecksFindPlantedDefects(t *testing.T) {
	g := map[string]pkg{
		module + "runtime/store":   {path: module + "runtime/store", imports: []string{module + "runtime/ledger"}},
		module + "runtime/ledger":  {path: module + "runtime/ledger", imports: []string{module + "runtime/store"}},
		module + "runtime/new":     {path: module + "runtime/new"},
		module + "runtime/gateway": {path: module + "runtime/gateway", imports: []string{module + "runtime/testenv", "fmt"}},
		module + "runtime/testenv": {path: module + "runtime/testenv", imports: []string{module + "runtime/gateway"}},
		"fmt":                      {path: "fmt", standard: true},
	}
	got := checkLayers(g, layers, harnesses)
	want := []string{
		"runtime/gateway imports the test harness runtime/testenv",
		"runtime/new has no layer: add it to deptest's layers",
		"runtime/store (layer 0) imports runtime/ledger (layer 2): an arrow must point to a lower layer",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("checkLayers found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	g = map[string]pkg{
		module + "runtime/nodeagent":      {path: module + "runtime/nodeagent", imports: []string{module + "runtime/dispatch"}},
		module + "runtime/dispatch":       {path: module + "runtime/dispatch", imports: []string{"github.com/jackc/pgx/v5/pgxpool"}},
		"github.com/jackc/pgx/v5/pgxpool": {path: "github.com/jackc/pgx/v5/pgxpool"},
	}
	got = checkForbidden(g, module+"runtime/nodeagent", forbidden["runtime/nodeagent"])
	if len(got) != 1 || !strings.Contains(got[0], "runtime/dispatch → github.com/jackc/pgx/v5/pgxpool") {
		t.Errorf("checkForbidden found %q, want the chain to pgx through dispatch", got)
	}
}

// overview is the document whose layers table (§5) shows layers and
// harnesses to readers.
const overview = "docs/architecture.md"

var (
	// overviewLayer is a row of the overview's layers table: "| 3: … | `a`, `b` |".
	overviewLayer = regexp.MustCompile(`^\| (\d+)\b[^|]*\| (.*) \|$`)
	codeName      = regexp.MustCompile("`([^`]+)`")
)

// overviewName is how the overview writes a package: without runtime/.
func overviewName(p string) string { return strings.TrimPrefix(p, "runtime/") }

// TestOverviewShowsTheLayers keeps the overview's layers table and its
// list of test harnesses what layers and harnesses hold.
func TestOverviewShowsTheLayers(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), overview))
	if err != nil {
		t.Fatal(err)
	}
	got := map[int][]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if m := overviewLayer.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1]) // digits: the pattern's
			for _, c := range codeName.FindAllStringSubmatch(m[2], -1) {
				got[n] = append(got[n], c[1])
			}
		}
	}
	for i, l := range layers {
		var want []string
		for _, p := range l {
			want = append(want, overviewName(p))
		}
		g := slices.Clone(got[i])
		slices.Sort(g)
		slices.Sort(want)
		if !slices.Equal(g, want) {
			t.Errorf("%s shows layer %d as %v; deptest's layers hold %v", overview, i, g, want)
		}
	}
	if len(got) != len(layers) {
		t.Errorf("%s shows %d layers; deptest has %d", overview, len(got), len(layers))
	}
	_, rest, ok := strings.Cut(string(doc), "Test harnesses (")
	if !ok {
		t.Fatalf("%s has no \"Test harnesses (…)\" list", overview)
	}
	list, _, _ := strings.Cut(rest, ")")
	var g, want []string
	for _, c := range codeName.FindAllStringSubmatch(list, -1) {
		g = append(g, c[1])
	}
	for p := range harnesses {
		want = append(want, overviewName(p))
	}
	slices.Sort(g)
	slices.Sort(want)
	if !slices.Equal(g, want) {
		t.Errorf("%s names the test harnesses %v; deptest's harnesses are %v", overview, g, want)
	}
}
