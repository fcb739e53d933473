package orchestrator

import (
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/registry"
)

// TestVerdictOf: what a node says of its models to the wake record. A node
// agent registered but not yet beaten may still be loading its engine:
// neither ready (which would end a wake early) nor at zero (which would
// refuse callers for the second before its first beat).
func TestVerdictOf(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	registered := now.Add(-2 * time.Second)
	for _, tc := range []struct {
		name string
		node registry.Node
		want coldstart.Verdict
	}{
		{"beaten, engine up", registry.Node{State: registry.StateActive, RegisteredAt: registered, LastSeen: now.Add(-time.Second)}, coldstart.Ready},
		{"registered, not beaten yet", registry.Node{State: registry.StateActive, RegisteredAt: registered, LastSeen: registered}, coldstart.Unsure},
		{"engine loading", registry.Node{State: registry.StateActive, RegisteredAt: registered, LastSeen: now, EngineDown: "health check: status 503"}, coldstart.Zero},
		{"silent", registry.Node{State: registry.StateActive, RegisteredAt: now.Add(-time.Hour), LastSeen: now.Add(-time.Minute)}, coldstart.Zero},
		{"draining", registry.Node{State: registry.StateDraining, RegisteredAt: registered, LastSeen: now}, coldstart.Zero},
		{"cloud node, scraped", registry.Node{State: registry.StateActive, LastSeen: now}, coldstart.Ready},
		{"cloud node, not scraped yet", registry.Node{State: registry.StateActive}, coldstart.Zero},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := verdictOf(tc.node, now); got != tc.want {
				t.Errorf("verdict %d, want %d", got, tc.want)
			}
		})
	}
}
