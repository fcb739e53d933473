// Package k8sschema validates Kubernetes manifests strictly against their
// real schemas: built-in kinds against the OpenAPI v3 documents that ship
// in the k8s.io/kubernetes module, custom resources against their CRDs'
// openAPIV3Schema. Strict means what kubectl's server-side field
// validation means: an unknown field is an error, as are a value of the
// wrong type, a missing required field, a value outside an enum, a string
// off its pattern or length and a number, list or map beyond its bounds.
// CEL rules (x-kubernetes-validations) are not evaluated.
package k8sschema

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Schema is one JSON-schema node, as decoded.
type Schema = map[string]any

// Validator knows the schema of each (apiVersion, kind) it was given.
type Validator struct {
	kinds map[string]kindSchema // "apps/v1 Deployment"
	// metaDefs are the schemas of a built-in document, for ObjectMeta: a
	// CRD's schema leaves metadata to the API server, which checks it as
	// ObjectMeta.
	metaDefs map[string]any
}

type kindSchema struct {
	root  Schema
	defs  map[string]any // components.schemas, for $ref (built-ins)
	where string
}

// New returns an empty validator.
func New() *Validator { return &Validator{kinds: map[string]kindSchema{}} }

// AddOpenAPI loads an OpenAPI v3 document (one of api/openapi-spec/v3 of
// the k8s.io/kubernetes module) and registers every kind it defines.
func (v *Validator) AddOpenAPI(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, ok := doc.Components.Schemas[objectMeta]; ok && v.metaDefs == nil {
		v.metaDefs = doc.Components.Schemas
	}
	for name, s := range doc.Components.Schemas {
		sm, _ := s.(Schema)
		gvks, _ := sm["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gm, _ := g.(map[string]any)
			apiVersion := fmt.Sprint(gm["version"])
			if grp := fmt.Sprint(gm["group"]); grp != "" {
				apiVersion = grp + "/" + apiVersion
			}
			v.kinds[apiVersion+" "+fmt.Sprint(gm["kind"])] = kindSchema{root: sm, defs: doc.Components.Schemas,
				where: filepath.Base(path) + "#" + name}
		}
	}
	return nil
}

// AddCRD loads a CustomResourceDefinition (YAML) and registers each of its
// versions' schema.
func (v *Validator) AddCRD(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd struct {
		Spec struct {
			Group string `yaml:"group"`
			Names struct {
				Kind string `yaml:"kind"`
			} `yaml:"names"`
			Versions []struct {
				Name   string `yaml:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
				} `yaml:"schema"`
			} `yaml:"versions"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, ver := range crd.Spec.Versions {
		v.kinds[crd.Spec.Group+"/"+ver.Name+" "+crd.Spec.Names.Kind] = kindSchema{
			root: ver.Schema.OpenAPIV3Schema, where: filepath.Base(path) + " " + ver.Name}
	}
	return nil
}

// Kinds lists the registered kinds.
func (v *Validator) Kinds() []string {
	out := make([]string, 0, len(v.kinds))
	for k := range v.kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Validate checks one decoded manifest and returns every problem found,
// each with its field path.
func (v *Validator) Validate(obj map[string]any) []string {
	key := fmt.Sprint(obj["apiVersion"]) + " " + fmt.Sprint(obj["kind"])
	ks, ok := v.kinds[key]
	if !ok {
		return []string{fmt.Sprintf("no schema for %s", key)}
	}
	var errs []string
	if ks.defs == nil && v.metaDefs != nil { // a custom resource
		if md, ok := obj["metadata"]; ok {
			checker{defs: v.metaDefs, errs: &errs}.check(md, Schema{"$ref": "#/components/schemas/" + objectMeta}, "metadata")
		}
		rest := make(map[string]any, len(obj))
		for k, val := range obj {
			if k != "metadata" {
				rest[k] = val
			}
		}
		obj = rest
	}
	c := checker{defs: ks.defs, errs: &errs}
	c.check(obj, ks.root, "")
	return errs
}

// objectMeta is ObjectMeta's schema name in Kubernetes' OpenAPI documents.
const objectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

type checker struct {
	defs map[string]any
	errs *[]string
}

func (c checker) fail(path, format string, args ...any) {
	if path == "" {
		path = "."
	}
	*c.errs = append(*c.errs, path+": "+fmt.Sprintf(format, args...))
}

// resolve follows a $ref into components.schemas.
func (c checker) resolve(s Schema) Schema {
	for depth := 0; depth < 32; depth++ {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		next, _ := c.defs[strings.TrimPrefix(ref, "#/components/schemas/")].(Schema)
		if next == nil {
			return Schema{}
		}
		s = next
	}
	return s
}

// matches reports whether v passes s without recording errors.
func (c checker) matches(v any, s Schema) bool {
	var errs []string
	checker{defs: c.defs, errs: &errs}.check(v, s, "")
	return len(errs) == 0
}

func (c checker) check(v any, s Schema, path string) {
	s = c.resolve(s)
	if all, ok := s["allOf"].([]any); ok {
		for _, sub := range all {
			if sm, ok := sub.(Schema); ok {
				c.check(v, sm, path)
			}
		}
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		if alts, ok := s[key].([]any); ok {
			if !slices.ContainsFunc(alts, func(a any) bool { sm, _ := a.(Schema); return c.matches(v, sm) }) {
				c.fail(path, "matches none of the allowed forms")
			}
		}
	}
	c.bounds(v, s, path)
	if s["x-kubernetes-int-or-string"] == true || s["format"] == "int-or-string" {
		switch v.(type) {
		case int, int64, string:
		default:
			c.fail(path, "want an integer or a string, got %T", v)
		}
		return
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		c.fail(path, "%v is not one of %v", v, enum)
	}
	typ, _ := s["type"].(string)
	switch typ {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			c.fail(path, "want an object, got %T", v)
			return
		}
		c.object(obj, s, path)
	case "array":
		arr, ok := v.([]any)
		if !ok {
			c.fail(path, "want an array, got %T", v)
			return
		}
		items, _ := s["items"].(Schema)
		for i, it := range arr {
			if items != nil {
				c.check(it, items, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			c.fail(path, "want a string, got %T (%v)", v, v)
		}
	case "integer":
		switch v.(type) {
		case int, int64:
		default:
			c.fail(path, "want an integer, got %T (%v)", v, v)
		}
	case "number":
		switch v.(type) {
		case int, int64, float64:
		default:
			c.fail(path, "want a number, got %T (%v)", v, v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			c.fail(path, "want a boolean, got %T (%v)", v, v)
		}
	case "":
		if obj, ok := v.(map[string]any); ok && (s["properties"] != nil || s["additionalProperties"] != nil) {
			c.object(obj, s, path)
		}
	}
}

// object checks an object's members: known ones against their schemas,
// others against additionalProperties, or refused.
func (c checker) object(obj map[string]any, s Schema, path string) {
	if s["x-kubernetes-preserve-unknown-fields"] == true && s["properties"] == nil {
		return
	}
	props, _ := s["properties"].(Schema)
	for _, r := range asStrings(s["required"]) {
		if _, ok := obj[r]; !ok {
			c.fail(join(path, r), "required")
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ps, ok := props[k].(Schema); ok {
			c.check(obj[k], ps, join(path, k))
			continue
		}
		switch ap := s["additionalProperties"].(type) {
		case Schema:
			c.check(obj[k], ap, join(path, k))
		case bool:
			if !ap {
				c.fail(join(path, k), "unknown field")
			}
		default:
			if s["x-kubernetes-preserve-unknown-fields"] != true {
				c.fail(join(path, k), "unknown field")
			}
		}
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func asStrings(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, a := range arr {
		if s, ok := a.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
