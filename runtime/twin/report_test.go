package twin

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/twin.md's list of substitutions")

// twinDoc is docs/twin.md, from this package's folder.
var twinDoc = filepath.Join("..", "..", "docs", "twin.md")

// TestDocListsTheSubstitutions: docs/twin.md lists the substitutions as
// the code has them (go test ./runtime/twin -run TestDoc -update rewrites
// the list).
func TestDocListsTheSubstitutions(t *testing.T) {
	if *update {
		if err := rewriteSection(twinDoc, substitutionsMarker, SubstitutionTable()); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(twinDoc)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := section(string(b), substitutionsMarker, "")
	if err != nil {
		t.Fatal(err)
	}
	if got != SubstitutionTable() {
		t.Errorf("docs/twin.md's substitutions differ from twin.Substitutions (run with -update):\n%s", SubstitutionTable())
	}
}
