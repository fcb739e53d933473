package deptest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// clockExceptions are the declarations of type func() time.Time that the
// one-clock rule lets stand, keyed "file: name", each with its reason.
var clockExceptions = map[string]string{
	"runtime/enginesim/config.go: WallClock": "the simulator runs on its own simulated clock (Clock); WallClock " +
		"only stamps the created field of responses with real time, as vLLM does",
}

// nowFuncs returns, as "file: name", every struct field, variable and
// parameter of type func() time.Time that src declares; a parameter's name
// is followed by " (parameter)".
func nowFuncs(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	timeName := ""
	for _, imp := range f.Imports {
		if imp.Path.Value == `"time"` {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	if timeName == "" {
		return nil, nil
	}
	isNowFunc := func(e ast.Expr) bool {
		ft, ok := e.(*ast.FuncType)
		if !ok || ft.Params.NumFields() != 0 || ft.Results.NumFields() != 1 {
			return false
		}
		sel, ok := ft.Results.List[0].Type.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Time" {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		return ok && x.Name == timeName
	}
	var found []string
	add := func(suffix string, names []*ast.Ident) {
		for _, n := range names {
			found = append(found, name+": "+n.Name+suffix)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.StructType:
			for _, fld := range n.Fields.List {
				if isNowFunc(fld.Type) {
					add("", fld.Names)
				}
			}
		case *ast.ValueSpec:
			if n.Type != nil && isNowFunc(n.Type) {
				add("", n.Names)
			}
		case *ast.FuncType:
			for _, p := range n.Params.List {
				if isNowFunc(p.Type) {
					add(" (parameter)", p.Names)
				}
			}
		}
		return true
	})
	return found, nil
}

// TestOneClock holds the rule "time from one clock": no package that ships
// under runtime/ keeps a func() time.Time of its own; it takes a
// k8s.io/utils/clock clock instead, so a fake clock drives every test. The
// binaries (every cmd folder) are composition roots and are not checked.
func TestOneClock(t *testing.T) {
	planted := `package p
import clk "time"
type c struct{ Now func() clk.Time; At clk.Time }
var stamp func() clk.Time
func open(now func() clk.Time) {}
`
	got, err := nowFuncs(token.NewFileSet(), "planted.go", planted)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"planted.go: Now", "planted.go: stamp", "planted.go: now (parameter)"}; !slices.Equal(got, want) {
		t.Fatalf("planted declarations: found %q, want %q", got, want)
	}

	seen := map[string]bool{}
	shippedFiles(t, true, func(fset *token.FileSet, rel string, src []byte) error {
		found, err := nowFuncs(fset, rel, src)
		if err != nil {
			return err
		}
		for _, f := range found {
			if _, ok := clockExceptions[f]; ok {
				seen[f] = true
				continue
			}
			t.Errorf("%s is a func() time.Time: take a k8s.io/utils/clock clock instead (default clock.RealClock{})", f)
		}
		return nil
	})
	for f := range clockExceptions {
		if !seen[f] {
			t.Errorf("clockExceptions lists %q, which the tree no longer declares: remove it", f)
		}
	}
}

// shippedFiles calls fn with every Go file under runtime/ that ships — no
// test file, nothing under testdata, and nothing under a cmd folder when
// skipCmd is set — and its path relative to the module root.
func shippedFiles(t *testing.T, skipCmd bool, fn func(fset *token.FileSet, rel string, src []byte) error) {
	t.Helper()
	root := moduleRoot(t)
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, "runtime"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == "testdata" || skipCmd && d.Name() == "cmd" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return fn(fset, rel, src)
	})
	if err != nil {
		t.Fatal(err)
	}
}
