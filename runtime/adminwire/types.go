package adminwire

import (
	"encoding/json"
	"fmt"
	"time"
)

// The types below are the bodies of the admin API's requests and
// answers; the package documentation gives their units.

// List is the envelope of every list answer: {"data":[…]}.
type List[T any] struct {
	Data []T `json:"data"`
}

// Team is a team and its money as the ledger sees it.
type Team struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	// BalanceMicrocredits is credits granted minus settled costs.
	BalanceMicrocredits int64 `json:"balance_microcredits"`
	// ReservedMicrocredits is held by requests still running.
	ReservedMicrocredits int64 `json:"reserved_microcredits"`
	// AvailableMicrocredits is balance minus reserved: what new requests
	// may reserve.
	AvailableMicrocredits int64     `json:"available_microcredits"`
	CreatedAt             time.Time `json:"created_at"`
	// ReleasedAt is when Terraform destroyed its llmplat_team: the
	// platform kept the team, and a create-only request of its name takes
	// it back. Absent while the team is held.
	ReleasedAt *time.Time `json:"released_at,omitempty"`
	// SelfServiceKeys lets the team's members create and revoke personal
	// keys in the console; off unless the platform turns it on.
	SelfServiceKeys bool `json:"self_service_keys"`
	// PersonalKeyMaxDays is the longest life, in days, of a personal key.
	PersonalKeyMaxDays int `json:"personal_key_max_days"`
}

// CreateTeamRequest is the body of POST /admin/teams.
type CreateTeamRequest struct {
	Name string `json:"name"`
}

// UpdateTeamRequest is the body of PATCH /admin/teams/{id}; an absent field
// is left as it is.
type UpdateTeamRequest struct {
	Name               *string `json:"name,omitempty"`
	SelfServiceKeys    *bool   `json:"self_service_keys,omitempty"`
	PersonalKeyMaxDays *int    `json:"personal_key_max_days,omitempty"`
}

// CreditRequest is the body of POST /admin/credits. A negative amount is a
// correction; zero is refused.
type CreditRequest struct {
	TeamID             int64 `json:"team_id"`
	AmountMicrocredits int64 `json:"amount_microcredits"`
	// IdempotencyKey makes a retried grant a no-op: the same key with the
	// same team and amount replays the first entry, with anything else it
	// is a 409.
	IdempotencyKey string `json:"idempotency_key"`
	Note           string `json:"note,omitempty"`
}

// Credit is one ledger credit entry.
type Credit struct {
	ID                 int64     `json:"id"`
	TeamID             int64     `json:"team_id"`
	AmountMicrocredits int64     `json:"amount_microcredits"`
	IdempotencyKey     string    `json:"idempotency_key"`
	Note               string    `json:"note"`
	CreatedAt          time.Time `json:"created_at"`
	// Replayed is true when the entry already existed: the grant was not
	// applied a second time.
	Replayed bool `json:"replayed"`
}

// Key statuses, computed at answer time.
const (
	KeyActive  = "active"
	KeyExpired = "expired"
	KeyRevoked = "revoked"
)

// Key origins: where a key was made.
const (
	// KeyOriginAdmin is a key made through the admin API (by Terraform or
	// the platform team): managed, read-only in the console.
	KeyOriginAdmin = "admin"
	// KeyOriginConsole is a personal key a team member made in the
	// console; the member's team may revoke it there.
	KeyOriginConsole = "console"
)

// Key is an API key as the admin API shows it: never its secret or hash.
type Key struct {
	ID     int64  `json:"id"`
	TeamID int64  `json:"team_id"`
	Name   string `json:"name"`
	// Prefix is the key's first characters ("llp_AbC123xy"), safe to show.
	Prefix string `json:"prefix"`
	// ModelAllowlist names the models the key may use; empty allows every
	// model.
	ModelAllowlist []string   `json:"model_allowlist"`
	RPM            int        `json:"rpm"`
	TokensPerDay   int64      `json:"tokens_per_day"`
	MaxStreams     int        `json:"max_streams"`
	MaxTokens      int        `json:"max_tokens"`
	ExpiresAt      *time.Time `json:"expires_at"`
	RevokedAt      *time.Time `json:"revoked_at"`
	CreatedAt      time.Time  `json:"created_at"`
	// Status is KeyActive, KeyExpired or KeyRevoked.
	Status string `json:"status"`
	// Origin is KeyOriginAdmin or KeyOriginConsole.
	Origin string `json:"origin"`
	// CreatedBy and RevokedBy name who made and revoked the key (an API
	// key's prefix or a JWT's subject); empty when not recorded.
	CreatedBy string `json:"created_by"`
	RevokedBy string `json:"revoked_by"`
}

// Managed reports whether k was made through the admin API, so is
// Terraform's or the platform team's to change, not the console's.
func (k Key) Managed() bool { return k.Origin != KeyOriginConsole }

// StatusAt is k's status at now: KeyRevoked, KeyExpired or KeyActive. The
// stores leave Status empty; the admin API and the console set it with this.
func (k Key) StatusAt(now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return KeyRevoked
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return KeyExpired
	}
	return KeyActive
}

// CreateKeyRequest is the body of POST /admin/keys. Zero limits are
// unlimited and an empty allowlist allows every model. MaxTokens caps the
// output of one request: the gateway clamps a request's max_tokens to it.
type CreateKeyRequest struct {
	TeamID         int64      `json:"team_id"`
	Name           string     `json:"name,omitempty"`
	ModelAllowlist []string   `json:"model_allowlist,omitempty"`
	RPM            int        `json:"rpm,omitempty"`
	TokensPerDay   int64      `json:"tokens_per_day,omitempty"`
	MaxStreams     int        `json:"max_streams,omitempty"`
	MaxTokens      int        `json:"max_tokens,omitempty"`
	ExpiresAt      *time.Time `json:"expires_at,omitempty"`
	// Key, optional, is a secret the client minted (llp_ and 43 base62
	// characters, as a generated one): the server stores its hash and
	// answers without a secret, so the secret never travels back. Without
	// it the server generates the secret and answers it once.
	Key string `json:"key,omitempty"`
}

// RotateKeyRequest is the optional body of POST /admin/keys/{id}/rotate:
// Key, when set, is the new secret the client minted; without a body the
// server generates one and answers it once.
type RotateKeyRequest struct {
	Key string `json:"key,omitempty"`
}

// UpdateKeyRequest is the body of PATCH /admin/keys/{id}. An absent field
// is left as it is; a zero limit removes the limit; an empty allowlist
// allows every model; "expires_at": null removes the expiry.
type UpdateKeyRequest struct {
	Name           *string      `json:"name,omitempty"`
	ModelAllowlist *[]string    `json:"model_allowlist,omitempty"`
	RPM            *int         `json:"rpm,omitempty"`
	TokensPerDay   *int64       `json:"tokens_per_day,omitempty"`
	MaxStreams     *int         `json:"max_streams,omitempty"`
	MaxTokens      *int         `json:"max_tokens,omitempty"`
	ExpiresAt      OptionalTime `json:"expires_at,omitzero"`
}

// SecretNote is the secret_note of a replayed create: why the secret is
// missing and what to do instead.
const SecretNote = "the secret was shown only in the first response to this Idempotency-Key; only its hash is stored, so rotate to get a new secret"

// CreatedKey is the answer to creating or rotating a key. Secret is set
// only in the first answer; a replay has Replayed and SecretNote instead.
// Rotated says a replay took the key over: the repeat supplied another
// secret than the first create's, which is lost, and the key now has the
// repeat's.
type CreatedKey struct {
	Key
	Secret     string `json:"key,omitempty"`
	Replayed   bool   `json:"replayed,omitempty"`
	Rotated    bool   `json:"rotated,omitempty"`
	SecretNote string `json:"secret_note,omitempty"`
}

// ModelSpec is the body of PUT /admin/models/{name}; every field is
// required. Prices are micro-credits per million tokens.
type ModelSpec struct {
	ServedName                  string `json:"served_name"`
	PromptPriceMicroPerMTok     int64  `json:"prompt_price_micro_per_mtok"`
	CompletionPriceMicroPerMTok int64  `json:"completion_price_micro_per_mtok"`
	MaxContextTokens            int    `json:"max_context_tokens"`
	MaxOutputTokens             int    `json:"max_output_tokens"`
}

// Model is a declared model.
type Model struct {
	Name string `json:"name"`
	ModelSpec
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Node is a registered node: its durable record from the nodes table, and
// Live when a NodeView is configured and the node is beating.
type Node struct {
	ID       string `json:"id"`
	Location string `json:"location"`
	GPUs     int    `json:"gpus"`
	GPUModel string `json:"gpu_model"`
	// Models is the JSON array the node registered, as stored.
	Models         json.RawMessage `json:"models"`
	ServiceURL     string          `json:"service_url,omitempty"`
	LastSeen       *time.Time      `json:"last_seen"`
	OrchestratorID string          `json:"orchestrator_id,omitempty"`
	State          string          `json:"state"`
	CreatedAt      time.Time       `json:"created_at"`
	Live           *NodeLive       `json:"live"`
	// Declared is what an operator declared for the node (labels, the GPU
	// count beside GPUs as registered), when there is a declaration.
	Declared *NodeDeclaration `json:"declared,omitempty"`
}

// NodeLive is a node's heartbeat state, from the orchestrator's registry.
type NodeLive struct {
	Healthy      bool      `json:"healthy"`
	QueueDepth   int       `json:"queue_depth"`
	Running      int       `json:"running"`
	KVCacheUsage float64   `json:"kv_cache_usage"`
	GPUUtil      float64   `json:"gpu_util"`
	Draining     bool      `json:"draining"`
	Owner        string    `json:"owner,omitempty"`
	BeatAt       time.Time `json:"beat_at"`
	// EngineDown says why the node's engine is down (and the node out of
	// routing), as its agent reported; absent when the engine is up.
	EngineDown string `json:"engine_down,omitempty"`
}

// NodeToken is a node token as listed: never its secret or hash.
type NodeToken struct {
	ID        int64      `json:"id"`
	NodeID    string     `json:"node_id"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// IssueNodeTokenRequest is the optional body of POST
// /admin/nodes/{id}/tokens. Token, optional, is a token the client minted
// (llpnode_ and 43 base62 characters, as a generated one): the server
// stores its hash and answers without it. Without it the server generates
// the token and answers it once.
type IssueNodeTokenRequest struct {
	Token string `json:"token,omitempty"`
}

// IssuedNodeToken is the answer to issuing a node token. Token is set only
// in the first answer; a replay has Replayed and SecretNote instead.
type IssuedNodeToken struct {
	NodeToken
	Token      string `json:"token,omitempty"`
	Replayed   bool   `json:"replayed,omitempty"`
	SecretNote string `json:"secret_note,omitempty"`
}

// DrainResult is the answer to POST /admin/nodes/{id}/drain.
type DrainResult struct {
	NodeID string `json:"node_id"`
	State  string `json:"state"`
}

// OptionalTime is a PATCH field that tells "absent" (Set false), "null"
// (Set, Value nil) and a time apart. Tag it omitzero.
type OptionalTime struct {
	Set   bool
	Value *time.Time
}

// SetTime returns an OptionalTime holding t.
func SetTime(t time.Time) OptionalTime { return OptionalTime{Set: true, Value: &t} }

// ClearTime returns an OptionalTime holding null.
func ClearTime() OptionalTime { return OptionalTime{Set: true} }

// IsZero reports whether the field is absent, for omitzero.
func (o OptionalTime) IsZero() bool { return !o.Set }

// MarshalJSON writes null or the time.
func (o OptionalTime) MarshalJSON() ([]byte, error) {
	if o.Value == nil {
		return []byte("null"), nil
	}
	return json.Marshal(*o.Value)
}

// UnmarshalJSON reads null or an RFC 3339 time; either marks the field set.
func (o *OptionalTime) UnmarshalJSON(b []byte) error {
	o.Set = true
	o.Value = nil
	if string(b) == "null" {
		return nil
	}
	var t time.Time
	if err := json.Unmarshal(b, &t); err != nil {
		return fmt.Errorf("want an RFC 3339 time or null: %w", err)
	}
	o.Value = &t
	return nil
}
