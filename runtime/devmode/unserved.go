package devmode

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
)

// nodeLister lists the registered nodes as GET /admin/nodes does, without
// live state (admin.SQLStore).
type nodeLister interface {
	ListNodes(ctx context.Context) ([]adminwire.Node, error)
}

// unserved tells the caller of a model no ready node serves why, in the
// local mode, where nothing starts a node: no cluster scales a model up, so
// a model whose nodes were drained stays without one until someone acts.
// It names the model's registered nodes and their states, and what brings
// one back.
type unserved struct {
	nodes  nodeLister
	logger *slog.Logger
}

var _ gateway.Unserved = unserved{}

// bringBack is what brings a node of a model back in the local mode.
const bringBack = "a drained node serves again once its agent registers anew: restart llmplat dev " +
	"(its own nodes register again), or start a node for the model " +
	"(docs/operations.md, \"Adding a node by hand\")"

// Unserved implements gateway.Unserved.
func (u unserved) Unserved(ctx context.Context, model string) string {
	nodes, err := u.nodes.ListNodes(ctx)
	if err != nil {
		u.logger.Warn("nodes not listed for a model no node serves", "model", model, "err", err)
		return "its nodes could not be listed (GET /admin/nodes shows them); " + bringBack
	}
	var states []string
	for _, n := range nodes {
		if servesModel(n, model) {
			states = append(states, fmt.Sprintf("%s is %s", n.ID, describe(n.State)))
		}
	}
	if len(states) == 0 {
		return "no node has registered for it; start a node for the model (docs/operations.md, \"Adding a node by hand\")"
	}
	return "of its nodes, " + strings.Join(states, ", ") + "; " + bringBack
}

// describe is a node's stored state in words: an active node of a model
// at zero is registered but neither connected nor healthy now.
func describe(state string) string {
	if state == "active" {
		return "not connected or its engine is down"
	}
	return state
}

// servesModel reports whether n registered model.
func servesModel(n adminwire.Node, model string) bool {
	var models []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(n.Models, &models); err != nil {
		return false
	}
	for _, m := range models {
		if m.Name == model {
			return true
		}
	}
	return false
}
