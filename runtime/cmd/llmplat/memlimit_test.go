package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestApplyMemoryLimit: the container's memory limit, as the rendered
// manifests pass it, sets the Go runtime's soft limit to 90 % of it; an
// explicit GOMEMLIMIT, no limit and a garbled one are each handled.
func TestApplyMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    int64 // the limit set; 0: none
		wantErr bool
	}{
		{"the reference gateway's 2 GiB", map[string]string{memoryLimitEnv: "2147483648"}, 1932735283, false},
		{"GOMEMLIMIT wins", map[string]string{memoryLimitEnv: "2147483648", "GOMEMLIMIT": "1GiB"}, 0, false},
		{"no limit in the environment", map[string]string{}, 0, false},
		{"no limit on the container", map[string]string{memoryLimitEnv: "0"}, 0, false},
		{"the largest quantity", map[string]string{memoryLimitEnv: "9223372036854775807"}, 0, false},
		{"not a number", map[string]string{memoryLimitEnv: "2Gi"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			got, err := applyMemoryLimit(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("set %d, want %d", got, tc.want)
			}
			runtimeLimit := debug.SetMemoryLimit(-1)
			if want := tc.want; want == 0 {
				want = math.MaxInt64
				if runtimeLimit != want {
					t.Errorf("runtime limit %d, want it unchanged", runtimeLimit)
				}
			} else if runtimeLimit != want {
				t.Errorf("runtime limit %d, want %d", runtimeLimit, want)
			}
		})
	}
}
