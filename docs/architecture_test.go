package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/registry"
)

// overviewFile is the overview, beside this test; moduleRoot is the
// module's root from here.
const (
	overviewFile = "architecture.md"
	moduleRoot   = ".."
)

// unchecked are the packages that start goroutines and whose tests run
// without a goroutine leak check, each with why; the overview names each
// on its goleak row (§3). A package that starts goroutines and is not here
// must check for leaks in its TestMain.
var unchecked = map[string]string{
	"runtime/console":      "its TestMain is testenv.Main, without the check",
	"runtime/modelsync":    "it has no TestMain",
	"runtime/twin":         "the cluster twin's harness, run on its own",
	"runtime/controlplane": "it has no tests: cmd/llmplat, devmode and platformtest run it, with the check",
	"runtime/frontdoor":    "it has no tests: cmd/llmplat, devmode and platformtest run it, with the check",
}

// notGo are capitalised words the overview writes as code that are not Go
// declarations.
var notGo = map[string]bool{"Authorization": true}

// TestOverview checks the overview's checkable claims against the tree:
// each check returns what it found false.
func TestOverview(t *testing.T) {
	doc := readOverview(t)
	tr := scanTree(t)
	for _, c := range checks(tr) {
		t.Run(c.name, func(t *testing.T) {
			for _, bad := range c.check(doc) {
				t.Error(bad)
			}
		})
	}
}

// TestChecksFindPlantedClaims: each check reports a false claim planted in
// the real overview, so that none passes by reading nothing.
func TestChecksFindPlantedClaims(t *testing.T) {
	doc := readOverview(t)
	tr := scanTree(t)
	// The range the overview states now, whatever the newest migration.
	migs := regexp.MustCompile(`0001–\d{4}`).FindString(doc)
	planted := map[string][2]string{
		"migrations":  {migs, "0001–0005"},
		"redis keys":  {"`q:{model}:missed`, ", ""},
		"tests":       {"`TestSettleDebitsOnce`", "`TestSettleDebitsTwice`"},
		"names":       {"`ledger.Ledger.Covers`", "`ledger.Covers`"},
		"links":       {"(api.md#gateway-errors)", "(api.md#gateway-faults)"},
		"leak checks": {"`modelsync`", "`modelcache`"},
	}
	for _, c := range checks(tr) {
		p, ok := planted[c.name]
		if !ok {
			t.Errorf("no planted claim for the check %q", c.name)
			continue
		}
		if !strings.Contains(doc, p[0]) {
			t.Errorf("%s: the overview no longer holds %q to plant a false claim in", c.name, p[0])
			continue
		}
		if got := c.check(strings.Replace(doc, p[0], p[1], 1)); len(got) == 0 {
			t.Errorf("%s: %q planted for %q went unreported", c.name, p[1], p[0])
		}
	}
}

// check is one kind of claim and how to find the false ones.
type check struct {
	name  string
	check func(doc string) []string
}

func checks(tr *tree) []check {
	return []check{
		{"migrations", func(doc string) []string { return checkMigrations(doc, tr.migrations) }},
		{"redis keys", func(doc string) []string { return checkRedisKeys(doc, tr.keys, tr.keyFamilies) }},
		{"tests", func(doc string) []string { return checkTests(doc, tr) }},
		{"names", func(doc string) []string { return checkNames(doc, tr) }},
		{"links", checkLinks},
		{"leak checks", func(doc string) []string { return checkLeakChecks(doc, tr) }},
	}
}

func readOverview(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(overviewFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the part of doc under the heading that starts with head, up
// to the next heading of the same or a higher level.
func section(doc, head string) string {
	level := strings.IndexFunc(head, func(r rune) bool { return r != '#' })
	var b strings.Builder
	in := false
	for _, line := range strings.Split(doc, "\n") {
		if h := strings.IndexFunc(line, func(r rune) bool { return r != '#' }); h > 0 && strings.HasPrefix(line[h:], " ") {
			if in && h <= level {
				break
			}
			if strings.HasPrefix(line, head) {
				in = true
			}
		}
		if in {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

var (
	codeSpan     = regexp.MustCompile("`([^`]+)`")
	migrationNo  = regexp.MustCompile(`\b0\d{3}\b`)
	migrationRng = regexp.MustCompile(`(\d{4})–(\d{4})`)
)

// checkMigrations: §2.1's heading gives the range of the migrations, the
// same in every dialect, and every migration number the overview cites
// exists.
func checkMigrations(doc string, dialects map[string][]string) []string {
	var bad []string
	head, _, _ := strings.Cut(section(doc, "### 2.1 "), "\n")
	m := migrationRng.FindStringSubmatch(head)
	if m == nil {
		return []string{fmt.Sprintf("§2.1's heading %q gives no migration range first–last", head)}
	}
	all := map[string]bool{}
	for d, nums := range dialects {
		if len(nums) == 0 || nums[0] != m[1] || nums[len(nums)-1] != m[2] {
			bad = append(bad, fmt.Sprintf("§2.1 says migrations %s–%s; %s has %v", m[1], m[2], d, nums))
		}
		for _, n := range nums {
			all[n] = true
		}
	}
	for _, n := range migrationNo.FindAllString(doc, -1) {
		if !all[n] {
			bad = append(bad, fmt.Sprintf("the overview cites migration %s, which does not exist", n))
		}
	}
	return bad
}

var (
	braced   = regexp.MustCompile(`\{[^}]*\}`)
	angled   = regexp.MustCompile(`<[^>]*>`)
	allDigit = regexp.MustCompile(`^\d{6,}$|^\d{4}-\d{2}-\d{2}(T\d{2})?$`)
	// keyLiteral is where a key's name starts in the code: prefix + "name:".
	keyLiteral = regexp.MustCompile(`\b(?:prefix|Prefix)\s*\+\s*"([a-z_]+)[:{]`)
)

// docKeyShape is a key as the overview writes it, its variable parts
// blanked: streams:{quota_id} → streams:{}, tpd:{quota_id}:<yyyymmdd> →
// tpd:{}:<>.
func docKeyShape(k string) string {
	return angled.ReplaceAllString(braced.ReplaceAllString(k, "{}"), "<>")
}

// family is a key's first word: q for q:{}:seq, nodes for nodes:live.
func family(shape string) string {
	if i := strings.IndexAny(shape, ":{"); i >= 0 {
		return shape[:i]
	}
	return shape
}

// checkRedisKeys: every key the key builders make is in §2.2's table, and
// every key of the table is made by a builder; a key family the code
// builds elsewhere (prefix + "name:…") is in the table too.
func checkRedisKeys(doc string, built, families []string) []string {
	var bad []string
	listed := map[string]bool{}
	for _, line := range strings.Split(section(doc, "### 2.2 "), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell, _, _ := strings.Cut(line[1:], "|")
		for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
			listed[docKeyShape(m[1])] = true
		}
	}
	builtSet, builtFamilies := map[string]bool{}, map[string]bool{}
	for _, k := range built {
		builtSet[k], builtFamilies[family(k)] = true, true
		if !listed[k] {
			bad = append(bad, fmt.Sprintf("the code builds the Redis key %s, which §2.2's table does not list", k))
		}
	}
	for k := range listed {
		switch f := family(k); {
		case builtFamilies[f] && !builtSet[k]:
			bad = append(bad, fmt.Sprintf("§2.2's table lists the Redis key %s, which no key builder makes", k))
		case !builtFamilies[f] && !slices.Contains(families, f):
			bad = append(bad, fmt.Sprintf("§2.2's table lists the Redis key %s, whose name the code never builds", k))
		}
	}
	for _, f := range families {
		found := false
		for k := range listed {
			found = found || strings.HasPrefix(k, f+":") || strings.HasPrefix(k, f+"{") || strings.Contains(k, ":"+f+":")
		}
		if !found {
			bad = append(bad, fmt.Sprintf("the code builds Redis keys named %s:…, which §2.2's table does not list", f))
		}
	}
	sort.Strings(bad)
	return bad
}

var (
	testName = regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)`")
	testPkg  = regexp.MustCompile("\\(`((?:runtime|provider|modules)/[A-Za-z0-9_./-]+)`")
)

// checkTests: every test the overview names exists, in the package named
// after it ("`TestX`, `TestY` (`runtime/ledger`)"), or anywhere when none
// is named.
func checkTests(doc string, tr *tree) []string {
	var bad []string
	for _, line := range strings.Split(doc, "\n") {
		for _, cell := range strings.Split(line, "|") {
			for _, seg := range strings.Split(cell, ";") {
				pkg := ""
				if m := testPkg.FindStringSubmatch(seg); m != nil {
					pkg = strings.TrimSuffix(m[1], "/")
				}
				for _, m := range testName.FindAllStringSubmatch(seg, -1) {
					switch dirs := tr.tests[m[1]]; {
					case len(dirs) == 0:
						bad = append(bad, fmt.Sprintf("the overview names %s, which no test file defines", m[1]))
					case pkg != "" && !dirs[pkg]:
						bad = append(bad, fmt.Sprintf("the overview names %s in %s, which defines no such test", m[1], pkg))
					}
				}
			}
		}
	}
	return bad
}

var (
	qualified = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?$`)
	member    = regexp.MustCompile(`^([A-Z][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)$`)
	exported  = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)
	camel     = regexp.MustCompile(`^[a-z]+[A-Z][A-Za-z0-9_]*$`)
	treePath  = regexp.MustCompile(`^(?:runtime|provider|modules|templates)(?:/[A-Za-z0-9_.-]+)*/?$`)
)

// checkNames: every file, folder and Go declaration the overview writes as
// code exists: pkg.Name is a top-level declaration of the package,
// pkg.Type.Member a method or field of that type, Type.Member one of some
// package's, and a bare Name or camelCase name is declared somewhere.
func checkNames(doc string, tr *tree) []string {
	var bad []string
	seen := map[string]bool{}
	for _, s := range codeSpans(doc) {
		if seen[s] {
			continue
		}
		seen[s] = true
		switch q := qualified.FindStringSubmatch(s); {
		case strings.HasSuffix(s, ".go") && !strings.ContainsAny(s, " "):
			if !tr.fileExists(s) {
				bad = append(bad, fmt.Sprintf("the overview names the file %s, which does not exist", s))
			}
		case treePath.MatchString(s):
			if fi, err := os.Stat(filepath.Join(moduleRoot, filepath.FromSlash(s))); err != nil || !fi.IsDir() {
				bad = append(bad, fmt.Sprintf("the overview names the folder %s, which does not exist", s))
			}
		case q != nil && tr.pkgs[q[1]] != nil:
			d := tr.pkgs[q[1]]
			if q[3] == "" && !d.top[q[2]] || q[3] != "" && !d.members[q[2]][q[3]] {
				bad = append(bad, fmt.Sprintf("the overview names %s, which package %s does not declare", s, q[1]))
			}
		case member.MatchString(s):
			t, mem, _ := strings.Cut(s, ".")
			if !tr.hasMember(t, mem) {
				bad = append(bad, fmt.Sprintf("the overview names %s, which no package declares", s))
			}
		case exported.MatchString(s) && strings.IndexFunc(s, unicode.IsLower) > 0 && !testName.MatchString("`"+s+"`") && !notGo[s],
			camel.MatchString(s):
			if !tr.names[s] {
				bad = append(bad, fmt.Sprintf("the overview names %s, which nothing declares", s))
			}
		}
	}
	return bad
}

// codeSpans are the code spans of doc's lines outside fenced blocks (a
// span never crosses a line in the overview).
func codeSpans(doc string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// checkLinks: every relative link resolves, and an anchor into a document
// names one of its headings.
func checkLinks(doc string) []string {
	var bad []string
	for _, m := range mdLink.FindAllStringSubmatch(doc, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		if file != "" {
			if _, err := os.Stat(filepath.FromSlash(file)); err != nil {
				bad = append(bad, fmt.Sprintf("the overview links %s, which does not exist", target))
				continue
			}
		}
		if anchor == "" {
			continue
		}
		text := doc
		if file != "" {
			b, err := os.ReadFile(filepath.FromSlash(file))
			if err != nil {
				bad = append(bad, fmt.Sprintf("the overview links %s: %v", target, err))
				continue
			}
			text = string(b)
		}
		if !slices.Contains(anchors(text), anchor) {
			bad = append(bad, fmt.Sprintf("the overview links %s, whose document has no such heading", target))
		}
	}
	return bad
}

// anchors are the anchors a renderer gives a Markdown document's
// headings: lower case, spaces as hyphens, punctuation dropped.
func anchors(md string) []string {
	var out []string
	for _, line := range strings.Split(md, "\n") {
		h := strings.TrimLeft(line, "#")
		if len(h) == len(line) || !strings.HasPrefix(h, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// checkLeakChecks: the packages that start goroutines without a leak check
// in their tests are exactly unchecked, and §3's goleak row names each.
func checkLeakChecks(doc string, tr *tree) []string {
	var bad []string
	for _, p := range tr.starters {
		if _, ok := unchecked[p]; !tr.leakChecked[p] && !ok {
			bad = append(bad, fmt.Sprintf("%s starts goroutines and its tests have no leak check (testenv.MainWithLeakCheck): add one, or name it on §3's goleak row and in unchecked", p))
		}
	}
	row := ""
	for _, line := range strings.Split(section(doc, "## 3."), "\n") {
		if strings.Contains(line, "goleak") {
			row = line
		}
	}
	for p, why := range unchecked {
		if !slices.Contains(tr.starters, p) || tr.leakChecked[p] {
			bad = append(bad, fmt.Sprintf("unchecked names %s (%s), which now starts no goroutine or checks for leaks: take it out here and in §3", p, why))
		}
		if !strings.Contains(row, "`"+path.Base(p)+"`") {
			bad = append(bad, fmt.Sprintf("§3's goleak row does not name %s, whose tests run without a leak check (%s)", path.Base(p), why))
		}
	}
	sort.Strings(bad)
	return bad
}

// tree is what the checks read of the module.
type tree struct {
	migrations  map[string][]string // dialect → migration numbers, in order
	keys        []string            // the key builders' keys, as shapes
	keyFamilies []string            // key names built from literals anywhere
	tests       map[string]map[string]bool
	pkgs        map[string]*pkgDecls // by package name; ambiguous names left out
	byDir       map[string]*pkgDecls
	names       map[string]bool // every declared name: top level, method, field
	files       map[string]bool // every file's base name
	starters    []string        // packages that start goroutines
	leakChecked map[string]bool // packages whose tests check for leaks
}

// pkgDecls is one package's declarations.
type pkgDecls struct {
	top     map[string]bool
	members map[string]map[string]bool // type → its methods and fields
}

func (tr *tree) fileExists(p string) bool {
	if !strings.Contains(p, "/") {
		return tr.files[p]
	}
	for _, c := range []string{p, "runtime/" + p} {
		if _, err := os.Stat(filepath.Join(moduleRoot, filepath.FromSlash(c))); err == nil {
			return true
		}
	}
	return false
}

func (tr *tree) hasMember(typ, mem string) bool {
	for _, d := range tr.byDir {
		if d.members[typ][mem] {
			return true
		}
	}
	return false
}

// placeholder stands for a key's variable part when a builder is called.
const placeholder = "X"

// scanTree reads the module: its Go files' declarations, tests and
// goroutines, the migrations, and the Redis keys its builders make.
func scanTree(t *testing.T) *tree {
	t.Helper()
	tr := &tree{migrations: map[string][]string{}, tests: map[string]map[string]bool{},
		byDir: map[string]*pkgDecls{}, names: map[string]bool{}, files: map[string]bool{}, leakChecked: map[string]bool{}}
	byName := map[string][]string{}
	starts := map[string]bool{}
	families := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(moduleRoot, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if p != moduleRoot && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		tr.files[name] = true
		rel, _ := filepath.Rel(moduleRoot, filepath.Dir(p))
		dir := filepath.ToSlash(rel)
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(name, "_test.go") {
			return scanTestFile(tr, fset, p, dir, src)
		}
		f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		d := tr.byDir[dir]
		if d == nil {
			d = &pkgDecls{top: map[string]bool{}, members: map[string]map[string]bool{}}
			tr.byDir[dir] = d
			if f.Name.Name != "main" {
				byName[f.Name.Name] = append(byName[f.Name.Name], dir)
			}
		}
		declare(tr, d, f)
		if startsGoroutines(f) {
			starts[dir] = true
		}
		for _, m := range keyLiteral.FindAllSubmatch(src, -1) {
			families[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tr.pkgs = map[string]*pkgDecls{}
	for name, dirs := range byName {
		if len(dirs) == 1 {
			tr.pkgs[name] = tr.byDir[dirs[0]]
		}
	}
	for p := range starts {
		tr.starters = append(tr.starters, p)
	}
	sort.Strings(tr.starters)
	for f := range families {
		tr.keyFamilies = append(tr.keyFamilies, f)
	}
	sort.Strings(tr.keyFamilies)
	for _, d := range []string{"postgres", "sqlite"} {
		files, err := filepath.Glob(filepath.Join(moduleRoot, "runtime", "store", "migrations", d, "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no %s migrations: %v", d, err)
		}
		for _, f := range files {
			tr.migrations[d] = append(tr.migrations[d], filepath.Base(f)[:4])
		}
		sort.Strings(tr.migrations[d])
	}
	tr.keys = builtKeys(t)
	return tr
}

// scanTestFile records the tests a test file defines and whether it checks
// for leaked goroutines.
func scanTestFile(tr *tree, fset *token.FileSet, p, dir string, src []byte) error {
	for _, mark := range []string{"MainWithLeakCheck(", "goleak.VerifyTestMain(", "goleak.VerifyNone(", "goleak.Find("} {
		if strings.Contains(string(src), mark) {
			tr.leakChecked[dir] = true
		}
	}
	f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil {
			if tr.tests[fn.Name.Name] == nil {
				tr.tests[fn.Name.Name] = map[string]bool{}
			}
			tr.tests[fn.Name.Name][dir] = true
		}
	}
	return nil
}

// declare records f's declarations in d and in tr.names.
func declare(tr *tree, d *pkgDecls, f *ast.File) {
	add := func(typ, name string) {
		if d.members[typ] == nil {
			d.members[typ] = map[string]bool{}
		}
		d.members[typ][name] = true
		tr.names[name] = true
	}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Recv == nil || len(decl.Recv.List) == 0 {
				d.top[decl.Name.Name], tr.names[decl.Name.Name] = true, true
				continue
			}
			add(receiverType(decl.Recv.List[0].Type), decl.Name.Name)
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					d.top[spec.Name.Name], tr.names[spec.Name.Name] = true, true
					switch typ := spec.Type.(type) {
					case *ast.StructType:
						for _, fld := range typ.Fields.List {
							for _, n := range fld.Names {
								add(spec.Name.Name, n.Name)
							}
							if len(fld.Names) == 0 {
								add(spec.Name.Name, receiverType(fld.Type))
							}
						}
					case *ast.InterfaceType:
						for _, m := range typ.Methods.List {
							for _, n := range m.Names {
								add(spec.Name.Name, n.Name)
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range spec.Names {
						d.top[n.Name], tr.names[n.Name] = true, true
					}
				}
			}
		}
	}
}

// receiverType is the name of a receiver's or an embedded field's type.
func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// startsGoroutines reports whether f starts a goroutine: a go statement,
// or a Go method (errgroup.Group's, sync.WaitGroup's).
func startsGoroutines(f *ast.File) bool {
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			found = true
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Go" {
				found = true
			}
		}
		return !found
	})
	return found
}

// builtKeys calls every exported method of the key builders that returns a
// key, with a placeholder for each variable part, and returns the keys as
// shapes (docKeyShape's).
func builtKeys(t *testing.T) []string {
	t.Helper()
	at := time.Date(2026, 12, 7, 19, 30, 0, 0, time.UTC)
	var keys []string
	for _, b := range []any{quota.NewKeys(""), registry.NewKeys("")} {
		v := reflect.ValueOf(b)
		for i := range v.NumMethod() {
			mt, name := v.Method(i).Type(), v.Type().Method(i).Name
			if mt.NumOut() != 1 || mt.Out(0).Kind() != reflect.String {
				continue
			}
			args := make([]reflect.Value, mt.NumIn())
			for j := range args {
				switch in := mt.In(j); {
				case in.Kind() == reflect.String:
					args[j] = reflect.ValueOf(placeholder).Convert(in)
				case in == reflect.TypeFor[time.Time]():
					args[j] = reflect.ValueOf(at)
				case in.Kind() == reflect.Int64:
					args[j] = reflect.ValueOf(int64(1)).Convert(in)
				default:
					t.Fatalf("%T.%s takes a %s: teach builtKeys to call it", b, name, in)
				}
			}
			keys = append(keys, builtShape(v.Method(i).Call(args)[0].String()))
		}
	}
	return append(keys, builtShape(auth.RevocationChannel("")))
}

// builtShape blanks a built key's variable parts as docKeyShape does: the
// braced part, and a placeholder or a date outside braces.
func builtShape(k string) string {
	parts := strings.Split(braced.ReplaceAllString(k, "{}"), ":")
	for i, p := range parts {
		if p == placeholder || allDigit.MatchString(p) {
			parts[i] = "<>"
		}
	}
	return strings.Join(parts, ":")
}
