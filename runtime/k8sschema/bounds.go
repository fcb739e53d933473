package k8sschema

import (
	"fmt"
	"regexp"
	"sync"
	"unicode/utf8"
)

// bounds checks the constraints on a value's content that the API server
// checks too: a string's pattern and length, a number's range, an array's
// and an object's size, unique items. (CEL rules, x-kubernetes-validations,
// are not evaluated.)
func (c checker) bounds(v any, s Schema, path string) {
	switch x := v.(type) {
	case string:
		n := float64(utf8.RuneCountInString(x))
		if lim, ok := number(s["minLength"]); ok && n < lim {
			c.fail(path, "%q is shorter than %v characters", x, lim)
		}
		if lim, ok := number(s["maxLength"]); ok && n > lim {
			c.fail(path, "%q is longer than %v characters", x, lim)
		}
		if p, ok := s["pattern"].(string); ok {
			if re := compiled(p); re != nil && !re.MatchString(x) {
				c.fail(path, "%q does not match %s", x, p)
			}
		}
	case int, int64, float64:
		n, _ := number(x)
		if lim, ok := number(s["minimum"]); ok && (n < lim || n == lim && s["exclusiveMinimum"] == true) {
			c.fail(path, "%v is below the minimum %v", x, lim)
		}
		if lim, ok := number(s["maximum"]); ok && (n > lim || n == lim && s["exclusiveMaximum"] == true) {
			c.fail(path, "%v is above the maximum %v", x, lim)
		}
	case []any:
		n := float64(len(x))
		if lim, ok := number(s["minItems"]); ok && n < lim {
			c.fail(path, "%d items, fewer than %v", len(x), lim)
		}
		if lim, ok := number(s["maxItems"]); ok && n > lim {
			c.fail(path, "%d items, more than %v", len(x), lim)
		}
		if s["uniqueItems"] == true {
			seen := map[string]bool{}
			for i, it := range x {
				k := fmt.Sprintf("%#v", it)
				if seen[k] {
					c.fail(fmt.Sprintf("%s[%d]", path, i), "a duplicate item")
				}
				seen[k] = true
			}
		}
	case map[string]any:
		n := float64(len(x))
		if lim, ok := number(s["minProperties"]); ok && n < lim {
			c.fail(path, "%d fields, fewer than %v", len(x), lim)
		}
		if lim, ok := number(s["maxProperties"]); ok && n > lim {
			c.fail(path, "%d fields, more than %v", len(x), lim)
		}
	}
}

// number reads a numeric schema keyword or value, as JSON (float64) or
// YAML (int) decoded it.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// patterns caches compiled schema patterns; nil marks one Go's regexp
// cannot compile (an ECMA-262 construct RE2 lacks), which is skipped.
var patterns sync.Map // string → *regexp.Regexp

func compiled(p string) *regexp.Regexp {
	if re, ok := patterns.Load(p); ok {
		return re.(*regexp.Regexp)
	}
	re, err := regexp.Compile(p)
	if err != nil {
		re = nil
	}
	patterns.Store(p, re)
	return re
}
