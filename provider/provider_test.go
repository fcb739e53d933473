package provider

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/frontdoor"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// TestMain runs the acceptance tests with the real terraform on the PATH,
// never a downloaded one, and never skipped for want of TF_ACC: make test
// runs them. Terraform reads a CLI config of the tests' own and does not
// phone home.
func TestMain(m *testing.M) {
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		if p, err := exec.LookPath("terraform"); err == nil {
			os.Setenv("TF_ACC_TERRAFORM_PATH", p)
		}
	}
	os.Setenv("TF_ACC", "1")
	os.Setenv("CHECKPOINT_DISABLE", "1")
	cli, err := filepath.Abs(filepath.Join("testdata", "terraform.rc"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TF_CLI_CONFIG_FILE", cli)
	testenv.Main(m)
}

// requireTerraform fails (CI) or skips the test without a terraform.
func requireTerraform(t *testing.T) {
	t.Helper()
	p := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if _, err := os.Stat(p); p == "" || err != nil {
		testenv.Missing(t, "terraform", "no terraform binary on the PATH or in TF_ACC_TERRAFORM_PATH", "install Terraform 1.11 or later")
	}
}

// platform is the admin API and gateway, started in the test on real
// PostgreSQL and Redis.
type platform struct {
	base    string
	token   string
	client  *adminclient.Client
	db      *store.DB
	rdb     *redis.Client
	prefix  string
	engine  string // the simulated engine's base URL
	g       *errgroup.Group
	gctx    context.Context
	started sync.Once
	wsURL   string
	reg     *registry.Registry
}

func startPlatform(t *testing.T) *platform {
	t.Helper()
	requireTerraform(t)
	ctx := t.Context()
	db, err := store.Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	env := testenv.Redis(t)
	rdb := env.Client()
	gctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(gctx)
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			cancel()
			if err := g.Wait(); err != nil && gctx.Err() == nil {
				t.Errorf("platform: %v", err)
			}
		})
	})
	led, err := ledger.New(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	g.Go(func() error { return led.Run(gctx) })
	token, err := auth.GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	// One simulated engine serves the model testModel.
	sim, err := enginesim.New(enginesim.Config{TimeScale: 50, ServedModelName: testModel, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.Go(func() error { return sim.Serve(gctx, ln) })
	if _, _, err := admin.NewSQLStore(db).PutModel(ctx, testModel, adminwire.ModelSpec{ServedName: testModel,
		PromptPriceMicroPerMTok: 100_000, CompletionPriceMicroPerMTok: 400_000, MaxContextTokens: 8192, MaxOutputTokens: 1024}, time.Now()); err != nil {
		t.Fatal(err)
	}
	direct := dispatch.NewDirect(map[string][]dispatch.Target{testModel: {{URL: "http://" + ln.Addr().String()}}}, nil)
	front, err := frontdoor.Start(gctx, g, frontdoor.Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", DB: db,
		AdminToken: token, Redis: rdb, RedisPrefix: env.Prefix, Ledger: led,
		Dispatcher: direct, URLGuard: &urlguard.Guard{AllowUnresolvable: true}})
	if err != nil {
		t.Fatal(err)
	}
	client, err := adminclient.NewClient(front.Base, token, &http.Client{})
	if err != nil {
		t.Fatal(err)
	}
	return &platform{base: front.Base, token: token, client: client, db: db, rdb: rdb, prefix: env.Prefix,
		engine: "http://" + ln.Addr().String(), g: g, gctx: gctx}
}

// orchestrator starts (once) an orchestrator replica on the platform's
// Redis and database and returns the node socket's URL, for agents.
func (p *platform) orchestrator(t *testing.T) string {
	t.Helper()
	p.started.Do(func() {
		reg, err := registry.New(p.rdb, registry.Config{Prefix: p.prefix})
		if err != nil {
			t.Fatal(err)
		}
		o, err := orchestrator.New(orchestrator.Config{ID: "orch-tf", Redis: p.rdb, Registry: reg,
			Tokens: admin.NewSQLNodeTokens(p.db), Events: orchestrator.NewEvents(p.db, nil)})
		if err != nil {
			t.Fatal(err)
		}
		p.g.Go(func() error { return o.Run(p.gctx) })
		srv := httptest.NewServer(o.Handler())
		t.Cleanup(srv.Close)
		p.wsURL, p.reg = "ws"+strings.TrimPrefix(srv.URL, "http")+orchestrator.ConnectPath, reg
	})
	return p.wsURL
}

// testModel is the model the platform under test serves.
const testModel = "llama-8b"

// completeMaxTokens is the max_tokens complete asks for.
const completeMaxTokens = 8

// complete streams a short chat completion with secret through the
// gateway and returns the HTTP status, having read the whole answer.
func (p *platform) complete(t *testing.T, secret string) int {
	t.Helper()
	body := `{"model":"` + testModel + `","stream":true,"max_tokens":` + strconv.Itoa(completeMaxTokens) +
		`,"messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, p.base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK && !strings.Contains(string(b), "data: [DONE]") {
		t.Fatalf("a 200 stream without its end: %s", b)
	}
	return resp.StatusCode
}

// factories serve the provider in the test process to the real terraform.
func factories() map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"llmplat": providerserver.NewProtocol6WithError(New("test")()),
	}
}

// providerBlock configures the provider for p.
func (p *platform) providerBlock() string {
	return fmt.Sprintf("provider \"llmplat\" {\n  endpoint = %q\n  token    = %q\n}\n", p.base, p.token)
}
