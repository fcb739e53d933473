package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// unavailableToken makes the harness's Authenticate fail as a broken key
// store would.
const unavailableToken = "unavailable-credential-for-tests"

// harness is the admin API on a real database behind httptest, with the
// real authenticator (bootstrap admin token and API keys through a
// KeyCache), and fakes for the optional hooks.
type harness struct {
	db          *store.DB
	store       *SQLStore
	tokens      *SQLNodeTokens
	ledger      *ledger.Ledger
	keys        *auth.KeyCache
	authn       *auth.Authenticator
	clock       *testingclock.FakeClock
	logs        *testenv.Buffer
	revoker     *recordingRevoker
	nodeRevoker *recordingNodeRevoker
	nodes       *fakeNodeView
	drainer     *fakeDrainer
	url         string
	adminToken  string
	client      *adminclient.Client
}

// harnessOptions turn optional hooks off.
type harnessOptions struct {
	noDrainer, noNodeView bool
}

func newHarness(t *testing.T, dsn string, opts harnessOptions) *harness {
	t.Helper()
	h := &harness{db: migratedDB(t, dsn), clock: testingclock.NewFakeClock(testStart), logs: &testenv.Buffer{}}
	h.store, h.tokens = NewSQLStore(h.db), NewSQLNodeTokens(h.db)
	var err error
	if h.ledger, err = ledger.New(h.db, ledger.Config{Clock: h.clock}); err != nil {
		t.Fatal(err)
	}
	if h.keys, err = auth.NewKeyCache(auth.KeyCacheConfig{Store: h.store, Clock: h.clock}); err != nil {
		t.Fatal(err)
	}
	if h.adminToken, err = auth.GenerateAdminToken(); err != nil {
		t.Fatal(err)
	}
	admin, err := auth.NewStaticAdminToken(h.adminToken)
	if err != nil {
		t.Fatal(err)
	}
	h.authn = &auth.Authenticator{Keys: h.keys, Admin: admin}
	h.revoker = &recordingRevoker{db: h.db, next: h.keys}
	h.nodeRevoker = &recordingNodeRevoker{}
	cfg := Config{
		DB: h.db, Ledger: h.ledger, Authenticate: h.authenticate, Revoker: h.revoker,
		NodeTokenRevoker: h.nodeRevoker, Clock: h.clock, Logger: debugLogger(h.logs),
	}
	if !opts.noNodeView {
		h.nodes = &fakeNodeView{}
		cfg.Nodes = h.nodes
	}
	if !opts.noDrainer {
		h.drainer = &fakeDrainer{}
		cfg.Drainer = h.drainer
	}
	api, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	h.url = srv.URL
	if h.client, err = adminclient.NewClient(srv.URL, h.adminToken, srv.Client()); err != nil {
		t.Fatal(err)
	}
	h.client.Retry.MaxAttempts = 1 // the server tests want each answer as it is
	return h
}

func (h *harness) authenticate(ctx context.Context, header string) (auth.Principal, error) {
	if header == "Bearer "+unavailableToken {
		return auth.Principal{}, auth.ErrUnavailable
	}
	return h.authn.Authenticate(ctx, header)
}

// raw sends one request with the admin token unless header sets another
// Authorization, and returns the status and body.
func (h *harness) raw(t *testing.T, method, path, body string, header http.Header) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.adminToken)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// team creates a team through the API and returns its id.
func (h *harness) team(t *testing.T, name string) int64 {
	t.Helper()
	tm, _, err := h.client.CreateTeam(context.Background(), name)
	if err != nil {
		t.Fatalf("create team %s: %v", name, err)
	}
	return tm.ID
}

// revokeCall is what the recording revoker saw when it was called.
type revokeCall struct {
	id        int64
	hash      []byte // api_keys.hash as committed at the call
	revoked   bool   // api_keys.revoked_at was committed at the call
	readError error
}

// recordingRevoker records each call with the key's committed state, read
// on another connection, then evicts from the real key cache.
type recordingRevoker struct {
	db   *store.DB
	next Revoker

	mu    sync.Mutex
	calls []revokeCall
	fail  error
}

func (r *recordingRevoker) RevokeKeyID(ctx context.Context, id int64) error {
	c := revokeCall{id: id}
	var revokedAt any
	c.readError = r.db.QueryRowContext(ctx, "SELECT hash, revoked_at FROM api_keys WHERE id = $1", id).Scan(&c.hash, &revokedAt)
	c.revoked = revokedAt != nil
	r.mu.Lock()
	r.calls = append(r.calls, c)
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		return fail
	}
	return r.next.RevokeKeyID(ctx, id)
}

func (r *recordingRevoker) setFail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = err
}

func (r *recordingRevoker) Calls() []revokeCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]revokeCall(nil), r.calls...)
}

// recordingNodeRevoker records node token revocations.
type recordingNodeRevoker struct {
	mu    sync.Mutex
	calls []string
}

func (r *recordingNodeRevoker) RevokeNodeToken(_ context.Context, nodeID string, tokenID int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, nodeID+"/"+itoa(tokenID))
	return nil
}

func (r *recordingNodeRevoker) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// fakeNodeView serves a fixed live map, or an error.
type fakeNodeView struct {
	mu   sync.Mutex
	live map[string]adminwire.NodeLive
	err  error
}

func (v *fakeNodeView) set(live map[string]adminwire.NodeLive, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.live, v.err = live, err
}

func (v *fakeNodeView) Live(context.Context) (map[string]adminwire.NodeLive, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.live, v.err
}

// fakeDrainer records drained nodes; unknown names fail as not found.
type fakeDrainer struct {
	mu      sync.Mutex
	drained []string
	unknown map[string]bool
}

func (d *fakeDrainer) Drain(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unknown[id] {
		return ErrNodeNotFound
	}
	d.drained = append(d.drained, id)
	return nil
}

func (d *fakeDrainer) Drained() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.drained...)
}

// apiError returns err as *APIError, failing t when it is not one.
func apiError(t *testing.T, err error) *adminwire.APIError {
	t.Helper()
	var ae *adminwire.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v, want an *APIError", err)
	}
	return ae
}

// wantAPIError fails t unless err is an *APIError with status and param.
func wantAPIError(t *testing.T, what string, err error, status int, param string) {
	t.Helper()
	var ae *adminwire.APIError
	if !errors.As(err, &ae) {
		t.Errorf("%s: error = %v, want a %d *APIError", what, err, status)
		return
	}
	if ae.Status != status || ae.Param != param {
		t.Errorf("%s: got %d param %q (%s), want %d param %q", what, ae.Status, ae.Param, ae.Message, status, param)
	}
}
