package registry

import (
	"math"
	"time"
)

// Location says how the orchestrator reaches a node's engine.
type Location string

// The locations of nodes.
const (
	// LocationCloud is a pod in the cluster: requests go over HTTP to its
	// ServiceURL, the socket carries control traffic only.
	LocationCloud Location = "cloud"
	// LocationOnPrem is a server behind NAT: everything goes over the
	// socket it dialled out.
	LocationOnPrem Location = "onprem"
)

// State is whether a node takes new work.
type State string

// The states of a live node.
const (
	// StateActive takes new requests.
	StateActive State = "active"
	// StateDraining finishes its in-flight requests and takes no new ones.
	StateDraining State = "draining"
)

// valid reports whether s is a state a record may hold.
func (s State) valid() bool {
	return s == StateActive || s == StateDraining
}

// GPU is one GPU of a node, as the node reported it at registration.
type GPU struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	MemoryBytes int64  `json:"memory_bytes"`
}

// ModelSlot is one model a node serves and the engine limits it runs with.
type ModelSlot struct {
	// Name is the platform's model name, the routing key.
	Name string `json:"name"`
	// ServedName is the name the engine knows the model by.
	ServedName string `json:"served_name"`
	// MaxNumSeqs is the engine's --max-num-seqs: streams at most.
	MaxNumSeqs int `json:"max_num_seqs"`
	// MaxModelLen is the engine's --max-model-len in tokens.
	MaxModelLen int `json:"max_model_len"`
	// KVCapacityTokens is how many tokens the engine's KV cache holds.
	KVCapacityTokens int64 `json:"kv_capacity_tokens"`
}

// NodeRecord is what a node says about itself when it registers, plus the
// replica that holds its socket.
type NodeRecord struct {
	ID string
	// Owner is the id of the orchestrator replica holding the socket.
	Owner    string
	Location Location
	// ServiceURL is the pod's URL under its headless Service; cloud nodes
	// only, and required for them.
	ServiceURL string
	GPUs       []GPU
	Models     []ModelSlot
	// Version is the node agent's version.
	Version string
}

// validate returns ErrInvalidName or ErrInvalidRecord unless r can be
// stored.
func (r NodeRecord) validate() error {
	if err := checkName("node id", r.ID); err != nil {
		return err
	}
	if err := checkName("owner", r.Owner); err != nil {
		return err
	}
	switch r.Location {
	case LocationCloud:
		if r.ServiceURL == "" {
			return invalid("cloud node %q has no service url", r.ID)
		}
	case LocationOnPrem:
		if r.ServiceURL != "" {
			return invalid("on-prem node %q has a service url", r.ID)
		}
	default:
		return invalid("node %q has location %q", r.ID, r.Location)
	}
	return validateModels(r.Models)
}

// validateModels checks the model slots a node reports.
func validateModels(models []ModelSlot) error {
	for _, m := range models {
		if err := checkName("model", m.Name); err != nil {
			return err
		}
		if m.MaxNumSeqs < 0 || m.MaxModelLen < 0 || m.KVCapacityTokens < 0 {
			return invalid("model %q has a negative limit", m.Name)
		}
	}
	return nil
}

// Heartbeat is a node's load at one moment, sent every 5 s.
type Heartbeat struct {
	// QueueDepth is the engine's waiting requests.
	QueueDepth int
	// Running is the engine's running requests.
	Running int
	// KVCacheUsage is the fraction of KV blocks in use, 0–1.
	KVCacheUsage float64
	// GPUUtil is the GPUs' utilisation, 0–1, or nil when the node has no
	// GPU telemetry; nil is stored as absent, never as 0.
	GPUUtil *float64
	// Models, when not nil, replaces the models the node serves (after a
	// load_model); nil leaves them as they are.
	Models []ModelSlot
	// EngineDown says why the node's engine is down (its /health failed,
	// or a request could not reach it); empty when it is up.
	EngineDown string
}

// validate returns ErrInvalidRecord unless hb can be stored.
func (hb Heartbeat) validate() error {
	if hb.QueueDepth < 0 || hb.Running < 0 {
		return invalid("negative queue depth %d or running %d", hb.QueueDepth, hb.Running)
	}
	if !fraction(hb.KVCacheUsage) {
		return invalid("kv cache usage %v is not in [0, 1]", hb.KVCacheUsage)
	}
	if hb.GPUUtil != nil && !fraction(*hb.GPUUtil) {
		return invalid("gpu utilisation %v is not in [0, 1]", *hb.GPUUtil)
	}
	if len(hb.EngineDown) > maxEngineDownBytes {
		return invalid("engine_down of %d bytes, at most %d", len(hb.EngineDown), maxEngineDownBytes)
	}
	return validateModels(hb.Models)
}

// maxEngineDownBytes bounds the stored reason an engine is down.
const maxEngineDownBytes = 256

// fraction reports whether v is a number in [0, 1].
func fraction(v float64) bool {
	return !math.IsNaN(v) && v >= 0 && v <= 1
}

// Node is a live node's record as stored in Redis.
type Node struct {
	ID           string
	Owner        string // orchestrator replica holding the socket
	Epoch        int64  // the registration that owns the record
	Location     Location
	ServiceURL   string // cloud nodes only
	GPUs         []GPU
	Models       []ModelSlot
	Version      string
	State        State
	RegisteredAt time.Time // Redis time of the registration
	LastSeen     time.Time // Redis time of the last heartbeat, or of the registration
	QueueDepth   int
	Running      int
	KVCacheUsage float64
	GPUUtil      *float64 // nil when the node reports no GPU telemetry
	// EngineDown says why the node's engine is down, as its agent last
	// reported; empty when it is up. A node whose engine is down is
	// registered and beating, but not healthy.
	EngineDown string
}

// Healthy reports whether the node may get new work at now: it is active,
// its engine is up, and it beat within HealthyWithin. LastSeen is the
// Redis server's time; the skew of a replica's clock against it is
// milliseconds against 10 s.
func (n Node) Healthy(now time.Time) bool {
	return n.State == StateActive && n.EngineDown == "" && now.Sub(n.LastSeen) <= HealthyWithin
}

// Serves returns the node's slot for model, if it serves it.
func (n Node) Serves(model string) (ModelSlot, bool) {
	for _, m := range n.Models {
		if m.Name == model {
			return m, true
		}
	}
	return ModelSlot{}, false
}
