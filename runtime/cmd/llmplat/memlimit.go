package main

import (
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitEnv names the container's memory limit in bytes, as the
// rendered manifests pass it (the downward API's limits.memory).
const memoryLimitEnv = "LLMPLAT_MEMORY_LIMIT"

// memoryLimitShare is the part of the container's limit the Go heap may
// reach before the garbage collector works to stay under it (the runtime's
// soft limit, GOMEMLIMIT): the rest is for what the runtime does not count
// — the binary's text, page tables, buffers in flight in the kernel — so
// that a burst of large requests ends in a collection, not in the kernel's
// OOM kill of the container and every stream it holds.
const memoryLimitShare = 0.9

// applyMemoryLimit sets the Go runtime's soft memory limit from the
// container's, read through getenv; an explicit GOMEMLIMIT wins, and no
// limit (unset, or 0: the container has none) changes nothing. It returns
// the limit it set, 0 for none.
func applyMemoryLimit(getenv func(string) string) (int64, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	raw := strings.TrimSpace(getenv(memoryLimitEnv))
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want the container's memory limit in bytes", memoryLimitEnv, raw)
	}
	// The downward API reports a container without a limit as the node's
	// allocatable memory, and 0 only when it knows none.
	if n == 0 || n == math.MaxInt64 {
		return 0, nil
	}
	limit := int64(float64(n) * memoryLimitShare)
	debug.SetMemoryLimit(limit)
	return limit, nil
}
