package clusterwatch

import (
	"maps"
	"slices"
	"testing"
)

// TestStranded: a ready engine on a disrupted Node is stranded when its
// model has no ready engine on any other Node; an unready one elsewhere
// (still loading) does not serve it, a ready one on a Node the slice does
// not name does, and each model is judged on its own.
func TestStranded(t *testing.T) {
	going := map[string]string{"n1": "node n1 disrupted by Karpenter", "n2": "node n2 cordoned"}
	for _, tc := range []struct {
		name    string
		engines map[string]engine
		want    []string
	}{
		{"alone on a going node", map[string]engine{"a": {"n1", "m", true}}, []string{"a"}},
		{"both on going nodes", map[string]engine{"a": {"n1", "m", true}, "b": {"n2", "m", true}}, []string{"a", "b"}},
		{"a replacement still loading", map[string]engine{"a": {"n1", "m", true}, "b": {"n3", "m", false}}, []string{"a"}},
		{"a replacement ready", map[string]engine{"a": {"n1", "m", true}, "b": {"n3", "m", true}}, nil},
		{"ready on an unnamed node", map[string]engine{"a": {"n1", "m", true}, "b": {"", "m", true}}, nil},
		{"unready on a going node", map[string]engine{"a": {"n1", "m", false}}, nil},
		{"another model's engine elsewhere", map[string]engine{"a": {"n1", "m", true}, "b": {"n3", "other", true}}, []string{"a"}},
		{"nothing going", map[string]engine{"a": {"n3", "m", true}}, nil},
	} {
		got := slices.Sorted(maps.Keys(stranded(tc.engines, going)))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: stranded %v, want %v", tc.name, got, tc.want)
		}
	}
}
