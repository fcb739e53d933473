package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ParseFile reads the platform description in the file at path (Parse).
func ParseFile(path string) (Platform, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Platform{}, err
	}
	return Parse(data)
}

// Parse reads a platform description strictly: an unknown or misspelt
// key, a key given twice, a value of the wrong type or a second document
// is an error naming the field, not a silent default.
func Parse(data []byte) (Platform, error) {
	var p Platform
	var root yaml.Node
	docs := yaml.NewDecoder(bytes.NewReader(data))
	if err := docs.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return p, fmt.Errorf("%w: empty file", ErrInvalid)
		}
		return p, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	// A second document would be ignored silently: refuse it.
	var extra yaml.Node
	if err := docs.Decode(&extra); !errors.Is(err, io.EOF) {
		return p, fmt.Errorf("%w: one YAML document expected, found more", ErrInvalid)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return p, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(namedErrors(te.Errors, fieldsByLine(&root)), "; "))
		}
		return p, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return p, nil
}

// yamlLine is the "line N: " yaml.v3 starts each of a TypeError's
// messages with.
var yamlLine = regexp.MustCompile(`^line (\d+): `)

// namedErrors puts the field a message's line holds in front of it:
// "gateway.replicas (line 12): cannot unmarshal …".
func namedErrors(msgs []string, fields map[int]string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m
		sub := yamlLine.FindStringSubmatch(m)
		if sub == nil {
			continue
		}
		line, _ := strconv.Atoi(sub[1])
		if f, ok := fields[line]; ok && f != "" {
			out[i] = fmt.Sprintf("%s (line %d): %s", f, line, m[len(sub[0]):])
		}
	}
	return out
}

// fieldsByLine maps each line of a document to the field it holds, as a
// path (plan.workloads[0].gpu); a line holding several fields (a flow
// mapping) maps to their common parent.
func fieldsByLine(root *yaml.Node) map[int]string {
	paths := map[int][]string{}
	var walk func(n *yaml.Node, path string)
	note := func(line int, path string) { paths[line] = append(paths[line], path) }
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			note(n.Line, path)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := path + "." + n.Content[i].Value
				if path == "" {
					k = n.Content[i].Value
				}
				note(n.Content[i].Line, k)
				walk(n.Content[i+1], k)
			}
		case yaml.SequenceNode:
			note(n.Line, path)
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		default:
			note(n.Line, path)
		}
	}
	walk(root, "")
	fields := make(map[int]string, len(paths))
	for line, ps := range paths {
		// The deepest fields the line holds: one for a key and its value,
		// several side by side in a flow mapping, which name their parent.
		var leaves []string
		for _, p := range ps {
			if !slices.ContainsFunc(ps, func(q string) bool { return q != p && under(q, p) }) {
				leaves = append(leaves, p)
			}
		}
		f := leaves[0]
		for _, l := range leaves[1:] {
			f = commonParent(f, l)
		}
		fields[line] = f
	}
	return fields
}

// under reports whether path lies under (or is) parent.
func under(path, parent string) bool {
	if parent == "" || path == parent {
		return true
	}
	return strings.HasPrefix(path, parent) && (path[len(parent)] == '.' || path[len(parent)] == '[')
}

// commonParent returns the longest field path both a and b lie under.
func commonParent(a, b string) string {
	switch {
	case under(b, a):
		return a
	case under(a, b):
		return b
	}
	n := 0
	for i := 0; i < len(a) && i < len(b) && a[i] == b[i]; i++ {
		if a[i] == '.' || a[i] == '[' {
			n = i
		}
	}
	return a[:n]
}
