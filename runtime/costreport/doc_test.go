package costreport

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestDocShowsRealOutput keeps docs/capacity.md honest: the report it
// pastes is the golden file, byte for byte.
func TestDocShowsRealOutput(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "capacity.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "week.golden.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, append(append([]byte("```\n"), want...), "```"...)) {
		t.Error("docs/capacity.md does not show testdata/week.golden.txt verbatim in a code block")
	}
}
