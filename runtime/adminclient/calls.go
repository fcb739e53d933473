package adminclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// idPath is prefix followed by the decimal id.
func idPath(prefix string, id int64) string { return prefix + strconv.FormatInt(id, 10) }

// namePath is prefix followed by the escaped name.
func namePath(prefix, name string) string { return prefix + url.PathEscape(name) }

// newIdempotencyKey returns a random Idempotency-Key for one logical
// create, reused by all its retries.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// idemHeader is the header carrying key, or a fresh key when it is empty.
func idemHeader(key string) http.Header {
	if key == "" {
		key = newIdempotencyKey()
	}
	return http.Header{adminwire.IdempotencyHeader: {key}}
}

// CreateTeam creates the team called name, or returns the existing one;
// created reports which.
func (c *Client) CreateTeam(ctx context.Context, name string) (t adminwire.Team, created bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPost, path: "/admin/teams", body: adminwire.CreateTeamRequest{Name: name}, out: &t})
	return t, status == http.StatusCreated, err
}

// CreateTeamOnly creates the team called name, or takes back the team of
// that name that ReleaseTeam released (created false), refusing a name the
// platform holds with an *APIError 409 (see IsAlreadyExists), so of
// concurrent creates exactly one succeeds. Retries reuse idempotencyKey (a
// random one when empty): a retry after a lost answer gets the team this
// call created (created false), not the 409.
func (c *Client) CreateTeamOnly(ctx context.Context, name, idempotencyKey string) (t adminwire.Team, created bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPost, path: "/admin/teams", body: adminwire.CreateTeamRequest{Name: name},
		header: createOnlyHeader(idempotencyKey), out: &t})
	return t, status == http.StatusCreated, err
}

// createOnlyHeader asks for a create only, under idempotencyKey.
func createOnlyHeader(idempotencyKey string) http.Header {
	h := idemHeader(idempotencyKey)
	h.Set(adminwire.CreateOnlyHeader, adminwire.CreateOnlyValue)
	return h
}

// IsAlreadyExists reports whether err is a create-only request's refusal
// of a name the platform already has.
func IsAlreadyExists(err error) bool {
	var ae *adminwire.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusConflict && ae.Code == adminwire.CodeAlreadyExists
}

// ListTeams returns every team.
func (c *Client) ListTeams(ctx context.Context) ([]adminwire.Team, error) {
	var l adminwire.List[adminwire.Team]
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/admin/teams", out: &l})
	return l.Data, err
}

// GetTeam returns the team with id and its balance.
func (c *Client) GetTeam(ctx context.Context, id int64) (adminwire.Team, error) {
	var t adminwire.Team
	_, err := c.do(ctx, call{method: http.MethodGet, path: idPath("/admin/teams/", id), out: &t})
	return t, err
}

// UpdateTeam changes the fields req sets.
func (c *Client) UpdateTeam(ctx context.Context, id int64, req adminwire.UpdateTeamRequest) (adminwire.Team, error) {
	var t adminwire.Team
	_, err := c.do(ctx, call{method: http.MethodPatch, path: idPath("/admin/teams/", id), body: req, out: &t})
	return t, err
}

// ReleaseTeam marks the team with id released: the platform keeps it, and
// a later CreateTeamOnly of its name takes it back instead of refusing it.
// Releasing twice is harmless.
func (c *Client) ReleaseTeam(ctx context.Context, id int64) (adminwire.Team, error) {
	var t adminwire.Team
	_, err := c.do(ctx, call{method: http.MethodPost, path: idPath("/admin/teams/", id) + "/release", out: &t})
	return t, err
}

// AddCredit records a credit entry once per req.IdempotencyKey; a replay
// returns the first entry with Replayed set.
func (c *Client) AddCredit(ctx context.Context, req adminwire.CreditRequest) (adminwire.Credit, error) {
	var cr adminwire.Credit
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/admin/credits", body: req, out: &cr})
	return cr, err
}

// GetCredit returns the credit entry with id.
func (c *Client) GetCredit(ctx context.Context, id int64) (adminwire.Credit, error) {
	var cr adminwire.Credit
	_, err := c.do(ctx, call{method: http.MethodGet, path: idPath("/admin/credits/", id), out: &cr})
	return cr, err
}

// CreateKey creates an API key; the answer holds its secret once. Retries
// reuse idempotencyKey (a random one when empty), so a retried create never
// makes a second key: a replay answers without the secret (Replayed). Pass
// a key kept across process restarts to extend that guarantee; with a
// client-minted secret (req.Key), a repeat from a process that lost the
// first secret takes the key over, rotated to the new one (Rotated).
func (c *Client) CreateKey(ctx context.Context, req adminwire.CreateKeyRequest, idempotencyKey string) (adminwire.CreatedKey, error) {
	var k adminwire.CreatedKey
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/admin/keys", body: req, header: idemHeader(idempotencyKey), out: &k})
	return k, err
}

// ListKeys returns the keys of the team with teamID, or every key when it
// is 0. No secret or hash is ever listed.
func (c *Client) ListKeys(ctx context.Context, teamID int64) ([]adminwire.Key, error) {
	var q url.Values
	if teamID != 0 {
		q = url.Values{"team_id": {strconv.FormatInt(teamID, 10)}}
	}
	var l adminwire.List[adminwire.Key]
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/admin/keys", query: q, out: &l})
	return l.Data, err
}

// GetKey returns the key with id.
func (c *Client) GetKey(ctx context.Context, id int64) (adminwire.Key, error) {
	var k adminwire.Key
	_, err := c.do(ctx, call{method: http.MethodGet, path: idPath("/admin/keys/", id), out: &k})
	return k, err
}

// UpdateKey changes the fields req sets.
func (c *Client) UpdateKey(ctx context.Context, id int64, req adminwire.UpdateKeyRequest) (adminwire.Key, error) {
	var k adminwire.Key
	_, err := c.do(ctx, call{method: http.MethodPatch, path: idPath("/admin/keys/", id), body: req, out: &k})
	return k, err
}

// RotateKey gives the key a new secret, returned once; the old one stops
// working.
func (c *Client) RotateKey(ctx context.Context, id int64) (adminwire.CreatedKey, error) {
	var k adminwire.CreatedKey
	_, err := c.do(ctx, call{method: http.MethodPost, path: idPath("/admin/keys/", id) + "/rotate", out: &k})
	return k, err
}

// RotateKeyTo replaces the key's secret with one the client minted: the
// answer holds no secret. Rotating to the secret it already has is a 409.
func (c *Client) RotateKeyTo(ctx context.Context, id int64, secret string) (adminwire.CreatedKey, error) {
	var k adminwire.CreatedKey
	_, err := c.do(ctx, call{method: http.MethodPost, path: idPath("/admin/keys/", id) + "/rotate",
		body: adminwire.RotateKeyRequest{Key: secret}, out: &k})
	return k, err
}

// ForgetKeyCreate tells the platform the client has kept the key's secret:
// a later create under the Idempotency-Key that made the key makes a new
// key instead of taking this one over.
func (c *Client) ForgetKeyCreate(ctx context.Context, id int64) (adminwire.Key, error) {
	var k adminwire.Key
	_, err := c.do(ctx, call{method: http.MethodDelete, path: idPath("/admin/keys/", id) + "/idempotency-key", out: &k})
	return k, err
}

// RevokeKey revokes the key; revoking a revoked key is a no-op.
func (c *Client) RevokeKey(ctx context.Context, id int64) (adminwire.Key, error) {
	var k adminwire.Key
	_, err := c.do(ctx, call{method: http.MethodDelete, path: idPath("/admin/keys/", id), out: &k})
	return k, err
}

// PutModel creates or updates the model called name; created reports
// which.
func (c *Client) PutModel(ctx context.Context, name string, spec adminwire.ModelSpec) (m adminwire.Model, created bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPut, path: namePath("/admin/models/", name), body: spec, out: &m})
	return m, status == http.StatusCreated, err
}

// CreateModel declares the model called name, refusing one the platform
// already declares with an *APIError 409 (see IsAlreadyExists) and leaving
// it as it is. Retries reuse idempotencyKey as in CreateTeamOnly.
func (c *Client) CreateModel(ctx context.Context, name string, spec adminwire.ModelSpec, idempotencyKey string) (m adminwire.Model, created bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPut, path: namePath("/admin/models/", name), body: spec,
		header: createOnlyHeader(idempotencyKey), out: &m})
	return m, status == http.StatusCreated, err
}

// WaitReady makes one cheap authenticated call (GET /admin/models, a few
// rows) and repeats it while the platform is not there yet (a connection
// refused or reset, 429, 502, 503, 504: a gateway starting behind its load
// balancer) with the client's backoff, until it answers or ctx ends. A
// refusal (401 or 403 for a wrong token, 404 for an endpoint that is not
// the platform) returns at once as an *APIError; when ctx ends first the
// error wraps both ctx's and the last try's.
func (c *Client) WaitReady(ctx context.Context) error {
	return c.WaitReadyUnless(ctx, nil)
}

// WaitReadyUnless is WaitReady that also returns at once after a try that
// failed with an error giveUp accepts (a nil giveUp accepts none): the
// caller knows that waiting longer cannot help.
func (c *Client) WaitReadyUnless(ctx context.Context, giveUp func(error) bool) error {
	// Tries without end: ctx alone bounds the wait.
	_, err := c.send(ctx, call{method: http.MethodGet, path: "/admin/models", out: &adminwire.List[adminwire.Model]{}, giveUp: giveUp}, math.MaxInt)
	return err
}

// ListModels returns every model.
func (c *Client) ListModels(ctx context.Context) ([]adminwire.Model, error) {
	var l adminwire.List[adminwire.Model]
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/admin/models", out: &l})
	return l.Data, err
}

// GetModel returns the model called name.
func (c *Client) GetModel(ctx context.Context, name string) (adminwire.Model, error) {
	var m adminwire.Model
	_, err := c.do(ctx, call{method: http.MethodGet, path: namePath("/admin/models/", name), out: &m})
	return m, err
}

// DeleteModel removes the model called name. A retry after a lost answer
// gets a 404 *APIError: callers that only want it gone treat 404 as done.
func (c *Client) DeleteModel(ctx context.Context, name string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: namePath("/admin/models/", name)})
	return err
}

// ListNodes returns the registered nodes with their live state.
func (c *Client) ListNodes(ctx context.Context) (adminwire.NodeList, error) {
	var l adminwire.NodeList
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/admin/nodes", out: &l})
	return l, err
}

// GetNode returns the registered node with id.
func (c *Client) GetNode(ctx context.Context, id string) (adminwire.Node, error) {
	var n adminwire.Node
	_, err := c.do(ctx, call{method: http.MethodGet, path: namePath("/admin/nodes/", id), out: &n})
	return n, err
}

// PutNodeDeclaration stores what is declared for the node, replacing any
// declaration; a repeat is harmless.
func (c *Client) PutNodeDeclaration(ctx context.Context, nodeID string, spec adminwire.NodeDeclarationSpec) (adminwire.NodeDeclaration, error) {
	var d adminwire.NodeDeclaration
	_, err := c.do(ctx, call{method: http.MethodPut, path: namePath("/admin/nodes/", nodeID) + "/declaration", body: spec, out: &d})
	return d, err
}

// GetNodeDeclaration returns what is declared for the node; an *APIError
// with status 404 when nothing is.
func (c *Client) GetNodeDeclaration(ctx context.Context, nodeID string) (adminwire.NodeDeclaration, error) {
	var d adminwire.NodeDeclaration
	_, err := c.do(ctx, call{method: http.MethodGet, path: namePath("/admin/nodes/", nodeID) + "/declaration", out: &d})
	return d, err
}

// DeleteNodeDeclaration removes the node's declaration, if any.
func (c *Client) DeleteNodeDeclaration(ctx context.Context, nodeID string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: namePath("/admin/nodes/", nodeID) + "/declaration"})
	return err
}

// DrainNode asks the orchestrator to drain the node.
func (c *Client) DrainNode(ctx context.Context, id string) (adminwire.DrainResult, error) {
	var d adminwire.DrainResult
	_, err := c.do(ctx, call{method: http.MethodPost, path: namePath("/admin/nodes/", id) + "/drain", out: &d})
	return d, err
}

// IssueNodeToken issues a token for the node; the answer holds it once.
// idempotencyKey works as in CreateKey.
func (c *Client) IssueNodeToken(ctx context.Context, nodeID, idempotencyKey string) (adminwire.IssuedNodeToken, error) {
	var t adminwire.IssuedNodeToken
	_, err := c.do(ctx, call{method: http.MethodPost, path: namePath("/admin/nodes/", nodeID) + "/tokens",
		header: idemHeader(idempotencyKey), out: &t})
	return t, err
}

// IssueNodeTokenTo issues the token the client minted (see
// credential.GenerateNodeToken) for the node: the answer holds no token, so a lost
// answer loses nothing. idempotencyKey works as in CreateKey.
func (c *Client) IssueNodeTokenTo(ctx context.Context, nodeID, token, idempotencyKey string) (adminwire.IssuedNodeToken, error) {
	var t adminwire.IssuedNodeToken
	_, err := c.do(ctx, call{method: http.MethodPost, path: namePath("/admin/nodes/", nodeID) + "/tokens",
		body: adminwire.IssueNodeTokenRequest{Token: token}, header: idemHeader(idempotencyKey), out: &t})
	return t, err
}

// ListNodeTokens returns the node's tokens, never their secrets.
func (c *Client) ListNodeTokens(ctx context.Context, nodeID string) ([]adminwire.NodeToken, error) {
	var l adminwire.List[adminwire.NodeToken]
	_, err := c.do(ctx, call{method: http.MethodGet, path: namePath("/admin/nodes/", nodeID) + "/tokens", out: &l})
	return l.Data, err
}

// RevokeNodeToken revokes the token with id; revoking twice is a no-op.
func (c *Client) RevokeNodeToken(ctx context.Context, id int64) (adminwire.NodeToken, error) {
	var t adminwire.NodeToken
	_, err := c.do(ctx, call{method: http.MethodDelete, path: idPath("/admin/node-tokens/", id), out: &t})
	return t, err
}
