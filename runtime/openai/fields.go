package openai

import (
	"reflect"
	"strings"
	"sync"
)

var fieldNameCache sync.Map // reflect.Type -> []string

// fieldNames lists the JSON names of a struct's encoded fields.
func fieldNames(v any) []string {
	t := reflect.TypeOf(v)
	if names, ok := fieldNameCache.Load(t); ok {
		return names.([]string)
	}
	var names []string
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || name == "" {
			continue
		}
		names = append(names, name)
	}
	fieldNameCache.Store(t, names)
	return names
}
