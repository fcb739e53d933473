package deptest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

// estimators are the functions of package tokens that estimate a
// prompt: an estimate made twice may differ from the one the ledger
// reserved for, and costs a pass over the prompt each time.
var estimators = []string{"EstimateRequest", "EstimateChat"}

// estimateCalls returns, as "name: function", every call to an estimator
// of package tokens in the file at path (src, when not nil).
func estimateCalls(fset *token.FileSet, name, path string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	pkg := ""
	for _, imp := range f.Imports {
		if imp.Path.Value == `"`+module+`runtime/tokens"` {
			pkg = "tokens"
			if imp.Name != nil {
				pkg = imp.Name.Name
			}
		}
	}
	if pkg == "" {
		return nil, nil
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !slices.Contains(estimators, sel.Sel.Name) {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == pkg {
			found = append(found, name+": "+sel.Sel.Name)
		}
		return true
	})
	return found, nil
}

// TestOneEstimate holds the rule "the prompt is estimated once": the
// gateway estimates it for the reservation (admission.go), and the job
// carries that estimate to the orchestrator's routing (dispatch.Job); no
// other code that ships calls an estimator.
func TestOneEstimate(t *testing.T) {
	planted := `package p
import tk "github.com/llmplat/llmplat/runtime/tokens"
func f() { _ = tk.EstimateRequest(nil) }
`
	got, err := estimateCalls(token.NewFileSet(), "planted.go", "planted.go", planted)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"planted.go: EstimateRequest"}; !slices.Equal(got, want) {
		t.Fatalf("planted call: found %q, want %q", got, want)
	}
	var all []string
	shippedFiles(t, false, func(fset *token.FileSet, rel string, src []byte) error {
		if strings.HasPrefix(rel, "runtime/tokens/") {
			return nil
		}
		found, err := estimateCalls(fset, rel, rel, src)
		all = append(all, found...)
		return err
	})
	want := []string{
		"runtime/gateway/admission.go: EstimateRequest",
		// A previous release's gateway sends no estimate: the replica
		// makes the one estimate of such a request (internalhop's legacy
		// path, gone once no such gateway runs).
		"runtime/internalhop/legacy.go: EstimateRequest",
	}
	if !slices.Equal(all, want) {
		t.Errorf("the prompt is estimated at %q; want it estimated once, at %q, and carried in the job", all, want)
	}
}
