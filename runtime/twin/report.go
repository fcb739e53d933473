package twin

import (
	"fmt"
	"os"
	"strings"
)

// Markers of docs/twin.md's generated sections.
const (
	substitutionsMarker = "twin:substitutions"
	reportMarker        = "twin:report"
)

// SubstitutionTable is the substitutions as docs/twin.md lists them.
func SubstitutionTable() string {
	var b strings.Builder
	b.WriteString("| object | substitution | why |\n|---|---|---|\n")
	for _, s := range Substitutions {
		obj := s.Kind
		if s.Names != nil {
			obj += " " + strings.Join(s.Names, ", ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", obj, s.Name, s.Why)
	}
	return b.String()
}

// section returns doc's text between the marker's opening and closing
// comments, and doc with that text replaced by text.
func section(doc, marker, text string) (string, string, error) {
	open, closing := "<!-- "+marker+" -->\n", "<!-- /"+marker+" -->"
	i := strings.Index(doc, open)
	j := strings.Index(doc, closing)
	if i < 0 || j < i {
		return "", "", fmt.Errorf("no section %s", marker)
	}
	start := i + len(open)
	return doc[start:j], doc[:start] + text + doc[j:], nil
}

// rewriteSection replaces the text of a marked section of the file at
// path.
func rewriteSection(path, marker, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	_, doc, err := section(string(b), marker, text)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
