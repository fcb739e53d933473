package console

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/costreport"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/store"
)

// Path is where the gateway mounts the console.
const Path = "/console"

// securityPolicy is every page's Content-Security-Policy: our own
// stylesheet and images only, no script at all, no inline style, no
// framing, forms posting only back to us.
const securityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Ledger is what the console reads of the ledger; *ledger.Ledger
// implements it. Usage is the very query GET /v1/usage answers from;
// UsageByDay is the same per UTC day.
type Ledger interface {
	Usage(ctx context.Context, teamID int64, from, to time.Time) ([]ledger.ModelUsage, error)
	UsageByDay(ctx context.Context, teamID int64, from, to time.Time) ([]ledger.DayUsage, error)
	Balance(ctx context.Context, teamID int64) (ledger.Balance, error)
	// UsageByKey, TeamLatency and PlatformLatency read the per-key usage
	// and the latency rollups (metrics.go).
	UsageByKey(ctx context.Context, teamID int64, from, to time.Time) ([]ledger.KeyUsage, error)
	TeamLatency(ctx context.Context, teamID int64, from, to time.Time, g ledger.LatencyGroup) ([]ledger.Latency, error)
	PlatformLatency(ctx context.Context, from, to time.Time) ([]ledger.Latency, error)
}

var _ Ledger = (*ledger.Ledger)(nil)

// Directory is what the console reads of teams, keys, models and nodes;
// *admin.SQLStore implements it.
type Directory interface {
	ListKeys(ctx context.Context, teamID int64) ([]adminwire.Key, error)
	GetKey(ctx context.Context, id int64) (adminwire.Key, error)
	ListModels(ctx context.Context) ([]adminwire.Model, error)
	ListTeams(ctx context.Context) ([]adminwire.Team, error)
	ListNodes(ctx context.Context) ([]adminwire.Node, error)
}

var _ Directory = (*admin.SQLStore)(nil)

// Config is what the console needs. Every field but Nodes, Pending,
// CostProfiles, Now and Logger is required.
type Config struct {
	// Authenticate verifies "Bearer <credential>" exactly as the gateway
	// does ((*auth.Authenticator).Authenticate).
	Authenticate func(ctx context.Context, authorization string) (auth.Principal, error)
	// Redis holds the sessions and the sign-in rate limit, so that every
	// gateway replica sees the same sessions; Prefix namespaces its keys.
	Redis  redis.UniversalClient
	Prefix string
	Ledger Ledger
	// DB answers the two reads no other package offers: recent credit
	// grants and a key's last use.
	DB        *store.DB
	Directory Directory
	// Nodes, optional, adds live heartbeat state to the nodes page, as it
	// does to GET /admin/nodes.
	Nodes admin.NodeView
	// Pending, optional, reads the requests waiting for a model across the
	// gateway replicas (the shared queue and the callers held while the
	// model wakes from zero), for the platform models page.
	Pending func(ctx context.Context, model string) (int64, error)
	// CostProfiles prices GPU-hours on the cost page; nil means the
	// reference workload's, as `llmplat report` without a config file.
	CostProfiles *costreport.Profiles
	// QueryTimeout bounds the database reads behind one page, and the
	// session's check of its API key; zero means store.RequestBudget, the
	// budget the gateway gives the same waits. A page still waiting then
	// is stuck on a frozen database and gets the designed 503 page instead
	// of a hung tab holding a pooled connection until the thaw.
	QueryTimeout time.Duration
	// SelfService, optional, lets the members of a team that allows it
	// make and revoke personal keys on the keys page; without it the page
	// is read-only.
	SelfService SelfService
	// Revoker, optional, drops a revoked personal key from every gateway's
	// key cache at once, as the admin API does; without it (one process,
	// no cache) the revocation applies at the next lookup.
	Revoker admin.Revoker
	// Clock tells the pages' time, the sessions' expiry and the cost
	// report's age; nil means the real clock.
	Clock clock.PassiveClock
	// Logger gets sign-in outcomes and failures, never a credential.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Authenticate == nil:
		return c, errors.New("console: an authenticate function is required")
	case c.Redis == nil:
		return c, errors.New("console: redis is required for sessions")
	case c.Ledger == nil, c.DB == nil, c.Directory == nil:
		return c, errors.New("console: a ledger, a database and a directory are required")
	case c.QueryTimeout < 0:
		return c, errors.New("console: a negative query timeout")
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = store.RequestBudget
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Console serves the web console.
type Console struct {
	cfg      Config
	pages    map[string]*template.Template
	sessions *sessions
	cost     *costCache
}

// New returns the console for cfg.
func New(cfg Config) (*Console, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	return &Console{cfg: cfg, pages: pages, sessions: &sessions{rdb: cfg.Redis, prefix: cfg.Prefix + "console:", clock: cfg.Clock},
		cost: newCostCache()}, nil
}

// Register mounts the console under Path on r.
func (c *Console) Register(r gin.IRouter) {
	g := r.Group(Path, secureHeaders)
	static, _ := fs.Sub(staticFS, "static") // the folder is embedded above
	g.StaticFS("/static", http.FS(static))
	g.GET("", func(ctx *gin.Context) { ctx.Redirect(http.StatusSeeOther, Path+"/") })
	g.GET("/", c.home)
	g.GET("/signin", c.signInForm)
	g.POST("/signin", c.signIn)
	g.POST("/signout", c.signOut)
	team := g.Group("", c.requireSession(false))
	team.GET("/usage", c.usagePage)
	team.GET("/usage.csv", c.usageCSV)
	team.GET("/usage.svg", c.usageChart)
	team.GET("/balance", c.balancePage)
	team.GET("/keys", c.keysPage)
	team.GET("/models", c.modelsPage)
	team.POST("/keys", c.createPersonalKey)
	team.POST("/keys/:id/revoke", c.revokePersonalKey)
	team.GET("/audit", c.auditPage)
	team.GET("/usage/keys", c.keyUsagePage)
	team.GET("/usage/keys.csv", c.keyUsageCSV)
	team.GET("/latency", c.latencyPage)
	plat := g.Group("/platform", c.requireSession(true))
	plat.GET("/nodes", c.nodesPage)
	plat.GET("/teams", c.teamsPage)
	plat.GET("/models", c.platformModelsPage)
	plat.GET("/cost", c.costPage)
	plat.GET("/slis", c.slisPage)
}

// secureHeaders sets the headers every console answer carries: the CSP,
// the framing ban for browsers that predate frame-ancestors, no sniffing,
// no referrer outside the console (within it the browser then sends the
// Origin header the forms check; "no-referrer" would make it "null"), and
// no caching of pages that show a team's money.
func secureHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", securityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.Next()
}

// home sends a signed-in visitor to their first page and anyone else to
// the sign-in form.
func (c *Console) home(ctx *gin.Context) {
	s, err := c.session(ctx)
	switch {
	case c.refuseUnavailableTo(ctx, s, err):
	case err != nil:
		ctx.Redirect(http.StatusSeeOther, Path+"/signin")
	case s.Principal.TeamID == 0:
		ctx.Redirect(http.StatusSeeOther, Path+"/platform/nodes")
	default:
		ctx.Redirect(http.StatusSeeOther, Path+"/usage")
	}
}
