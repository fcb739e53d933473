package adminwire

import "time"

// NodeDeclaredModel is one model a node is declared to serve, with its
// engine's limits: one -model flag of the node agent.
type NodeDeclaredModel struct {
	Name          string `json:"name"`
	ServedName    string `json:"served_name"`
	MaxNumSeqs    int64  `json:"max_num_seqs"`
	MaxModelLen   int64  `json:"max_model_len"`
	KVCacheTokens int64  `json:"kv_cache_tokens"`
}

// NodeDeclarationSpec is what an operator declares for a node (the body
// of PUT /admin/nodes/{id}/declaration): the inputs of its agent's command
// line, and inventory fields. GPUCount is shown beside what the agent
// reports, never enforced: the agent counts the GPUs it can see
// (CUDA_VISIBLE_DEVICES, MIG), which may differ from the hardware for good
// reasons. Nil GPUCount or Labels means not declared.
type NodeDeclarationSpec struct {
	OrchestratorURL string              `json:"orchestrator_url"`
	EngineURL       string              `json:"engine_url"`
	Models          []NodeDeclaredModel `json:"models"`
	GPUCount        *int64              `json:"gpu_count"`
	Labels          map[string]string   `json:"labels"`
}

// NodeDeclaration is a stored declaration.
type NodeDeclaration struct {
	NodeID string `json:"node_id"`
	NodeDeclarationSpec
	UpdatedAt time.Time `json:"updated_at"`
}

// NodeList is the answer to GET /admin/nodes. LiveUnavailable is set when
// a NodeView is configured but failed: the registered nodes are listed
// without live state rather than not at all.
type NodeList struct {
	Data            []Node `json:"data"`
	LiveUnavailable bool   `json:"live_unavailable,omitempty"`
}
