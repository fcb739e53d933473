package nodeproto

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"unicode/utf8"
)

// Location says where a node runs, which decides how requests reach it.
type Location string

// Locations of a node.
const (
	// LocationOnPrem is a node behind NAT: requests travel over its socket.
	LocationOnPrem Location = "onprem"
	// LocationCloud is a sidecar in the cluster: requests go by HTTP to its
	// ServiceURL and the socket carries control only.
	LocationCloud Location = "cloud"
)

// Capabilities a node may announce in register.
const (
	// CapLoadModel means the agent has a loader configured for load_model.
	CapLoadModel = "load_model"
)

// Register is a node's first frame: who it is, its credential and what it
// can serve. The server answers welcome, retry_after or error.
type Register struct {
	NodeID string `json:"node_id"`
	// Token is the node's own token, checked against its stored hash.
	Token Secret `json:"token"`
	// GPUs lists the node's GPUs; the count is their number. It may be
	// empty when telemetry is unavailable (a simulated engine).
	GPUs []GPU `json:"gpus,omitempty"`
	// Models are the models the engine serves now; empty until one loads.
	Models []Model `json:"models,omitempty"`
	// Version is the agent's software version.
	Version  string   `json:"version"`
	Location Location `json:"location"`
	// ServiceURL is a cloud node's engine address; on-prem nodes have none.
	ServiceURL string `json:"service_url,omitempty"`
	// Capabilities are optional features the agent supports (CapLoadModel).
	Capabilities []string `json:"capabilities,omitempty"`
}

// GPU is one GPU of a node.
type GPU struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	MemoryBytes int64  `json:"memory_bytes"`
}

// Model is one model a node serves, with the sizing routing needs.
type Model struct {
	// Name is the platform's model name, the routing key.
	Name string `json:"name"`
	// ServedName is the engine's name for it, put in the assign body.
	ServedName       string `json:"served_name"`
	MaxNumSeqs       int    `json:"max_num_seqs"`
	MaxModelLen      int    `json:"max_model_len"`
	KVCapacityTokens int64  `json:"kv_capacity_tokens"`
}

// Chunk carries one server-sent event of the engine for a request.
type Chunk struct {
	RequestID string `json:"request_id"`
	// Seq numbers the request's chunks from 0; a gap breaks the stream.
	Seq int64 `json:"seq"`
	// Delta is the event's JSON payload byte for byte, usage chunk included.
	// A decoded Delta may share memory with the decoded input.
	Delta json.RawMessage `json:"delta"`
}

// Done ends a request with its token counts: from the engine's usage chunk,
// or after a cancel from the chunks the agent read.
type Done struct {
	RequestID        string `json:"request_id"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	// FinishReason is the engine's (openai.FinishStop, …) or
	// openai.FinishAbort after a cancel; empty when the stream broke.
	FinishReason string `json:"finish_reason,omitempty"`
}

// Heartbeat is a node's load report, sent every HeartbeatInterval.
type Heartbeat struct {
	// QueueDepth is the engine's waiting requests (vllm:num_requests_waiting).
	QueueDepth int `json:"queue_depth"`
	// KVCacheUsage is the fraction of KV blocks in use, nil when unknown.
	KVCacheUsage *float64 `json:"kv_cache_usage,omitempty"`
	// GPUUtil is the GPU busy fraction, nil when unknown (which is not 0).
	GPUUtil *float64 `json:"gpu_util,omitempty"`
	// Running is the engine's running requests (vllm:num_requests_running).
	Running int `json:"running"`
	// Models are the models served now; absent means none.
	Models   []string `json:"models,omitempty"`
	Draining bool     `json:"draining"`
	// EngineDown says why the engine cannot serve (its /health failed, a
	// request could not reach it), at most MaxEngineDownBytes; absent when
	// it is up. The server takes the node out of routing while it is set.
	EngineDown string `json:"engine_down,omitempty"`
}

// MaxEngineDownBytes bounds a heartbeat's engine_down: a short reason.
const MaxEngineDownBytes = 256

// Error reports a request's failure (node → server, with RequestID) or the
// connection's (server → node, without it, before a close).
type Error struct {
	RequestID string `json:"request_id,omitempty"`
	// Status is an HTTP status, 400–599.
	Status  int    `json:"status"`
	Message string `json:"message"`
	// Body is the engine's OpenAI-shaped error body, if it sent one.
	Body json.RawMessage `json:"body,omitempty"`
	// RetryAfter is the engine's Retry-After advice in seconds, if any.
	RetryAfter int `json:"retry_after,omitempty"`
}

// Type returns TypeRegister.
func (*Register) Type() Type { return TypeRegister }

// Type returns TypeChunk.
func (*Chunk) Type() Type { return TypeChunk }

// Type returns TypeDone.
func (*Done) Type() Type { return TypeDone }

// Type returns TypeHeartbeat.
func (*Heartbeat) Type() Type { return TypeHeartbeat }

// Type returns TypeError.
func (*Error) Type() Type { return TypeError }

func (*Register) isFrame()  {}
func (*Chunk) isFrame()     {}
func (*Done) isFrame()      {}
func (*Heartbeat) isFrame() {}
func (*Error) isFrame()     {}

// LogValue logs a registration without its token: slog's JSON handler
// would otherwise encode the token in the clear.
func (r *Register) LogValue() slog.Value {
	if r == nil {
		return slog.Value{}
	}
	models := make([]string, len(r.Models))
	for i, m := range r.Models {
		models[i] = m.Name
	}
	return slog.GroupValue(slog.String("node_id", r.NodeID), slog.String("version", r.Version),
		slog.String("location", string(r.Location)), slog.Int("gpus", len(r.GPUs)),
		slog.Any("models", models))
}

// Validate checks the node id, token, version, location and inventory.
func (r *Register) Validate() error {
	const t = TypeRegister
	switch {
	case r == nil:
		return nilFrame(t)
	case r.Token == "":
		return invalid(t, "token", "is required")
	case r.Version == "":
		return invalid(t, "version", "is required")
	}
	if err := checkID(t, "node_id", r.NodeID); err != nil {
		return err
	}
	if err := r.validateLocation(); err != nil {
		return err
	}
	seenGPU := make(map[int]bool, len(r.GPUs))
	for i, g := range r.GPUs {
		field := fmt.Sprintf("gpus[%d]", i)
		switch {
		case g.Index < 0 || seenGPU[g.Index]:
			return invalid(t, field+".index", "must be unique and non-negative")
		case g.Name == "":
			return invalid(t, field+".name", "is required")
		case g.MemoryBytes <= 0:
			return invalid(t, field+".memory_bytes", "must be positive")
		}
		seenGPU[g.Index] = true
	}
	seenModel := make(map[string]bool, len(r.Models))
	for i, m := range r.Models {
		field := fmt.Sprintf("models[%d]", i)
		switch {
		case m.Name == "" || seenModel[m.Name]:
			return invalid(t, field+".name", "must be unique and non-empty")
		case m.ServedName == "":
			return invalid(t, field+".served_name", "is required")
		case m.MaxNumSeqs <= 0 || m.MaxModelLen <= 0 || m.KVCapacityTokens <= 0:
			return invalid(t, field, "needs positive max_num_seqs, max_model_len and kv_capacity_tokens")
		}
		seenModel[m.Name] = true
	}
	for i, c := range r.Capabilities {
		if c == "" {
			return invalid(t, fmt.Sprintf("capabilities[%d]", i), "is empty")
		}
	}
	return nil
}

// validateLocation requires a service URL exactly for cloud nodes.
func (r *Register) validateLocation() error {
	const t = TypeRegister
	switch r.Location {
	case LocationOnPrem:
		if r.ServiceURL != "" {
			return invalid(t, "service_url", "is only for cloud nodes")
		}
	case LocationCloud:
		u, err := url.Parse(r.ServiceURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid(t, "service_url", "must be an http(s) URL for a cloud node")
		}
	default:
		return invalid(t, "location", `must be "onprem" or "cloud"`)
	}
	return nil
}

// Validate checks the request id, the sequence number and that the delta is
// one JSON object.
func (c *Chunk) Validate() error {
	const t = TypeChunk
	if c == nil {
		return nilFrame(t)
	}
	if err := checkID(t, "request_id", c.RequestID); err != nil {
		return err
	}
	if c.Seq < 0 {
		return invalid(t, "seq", "must be non-negative")
	}
	return checkObject(t, "delta", c.Delta)
}

// Validate checks the request id and the counts.
func (d *Done) Validate() error {
	const t = TypeDone
	if d == nil {
		return nilFrame(t)
	}
	if d.PromptTokens < 0 || d.CompletionTokens < 0 {
		return invalid(t, "prompt_tokens", "and completion_tokens must be non-negative")
	}
	return checkID(t, "request_id", d.RequestID)
}

// Validate checks the counts, the fractions and the model names.
func (h *Heartbeat) Validate() error {
	const t = TypeHeartbeat
	switch {
	case h == nil:
		return nilFrame(t)
	case h.QueueDepth < 0:
		return invalid(t, "queue_depth", "must be non-negative")
	case h.Running < 0:
		return invalid(t, "running", "must be non-negative")
	case len(h.EngineDown) > MaxEngineDownBytes || !utf8.ValidString(h.EngineDown):
		return invalid(t, "engine_down", fmt.Sprintf("must be valid UTF-8 of at most %d bytes", MaxEngineDownBytes))
	}
	if err := checkFraction(t, "kv_cache_usage", h.KVCacheUsage); err != nil {
		return err
	}
	if err := checkFraction(t, "gpu_util", h.GPUUtil); err != nil {
		return err
	}
	for i, m := range h.Models {
		if m == "" {
			return invalid(t, fmt.Sprintf("models[%d]", i), "is empty")
		}
	}
	return nil
}

// Validate checks the status, the message, the optional request id and
// that an optional body is one JSON object.
func (e *Error) Validate() error {
	const t = TypeError
	switch {
	case e == nil:
		return nilFrame(t)
	case e.Status < 400 || e.Status > 599:
		return invalid(t, "status", "must be an HTTP error status (400–599)")
	case e.Message == "":
		return invalid(t, "message", "is required")
	case e.RetryAfter < 0:
		return invalid(t, "retry_after", "must be non-negative")
	}
	if e.RequestID != "" && !ValidID(e.RequestID) {
		return checkID(t, "request_id", e.RequestID)
	}
	if len(e.Body) > 0 {
		return checkObject(t, "body", e.Body)
	}
	return nil
}
