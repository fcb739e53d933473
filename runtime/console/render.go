package console

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
)

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"signin", "error", "usage", "balance", "keys", "models", "nodes", "teams", "platform_models", "cost",
	"key_created", "audit", "usage_keys", "latency", "platform_slis"}

// funcs are the templates' formatting helpers.
var funcs = template.FuncMap{
	"credits": formatCredits,
	"int":     formatInt,
	"when":    formatTime,
	// exact writes a time to the nanosecond for a page's data attributes,
	// so a test can ask the ledger about the very window a page shows.
	"exact": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"pct":   func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" },
	"perM":  func(micro int64) string { return formatCredits(micro) },
	"fixed": func(f float64, dec int) string { return strconv.FormatFloat(f, 'f', dec, 64) },
	"ms":    formatLatency,
	"optUSD": func(f *float64) string {
		if f == nil {
			return "—"
		}
		return strconv.FormatFloat(*f, 'f', 2, 64)
	},
}

func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// pageView is what every page shows around its content: who is signed in,
// the sign-out form's token, and where the numbers come from and when they
// were read.
type pageView struct {
	Title      string
	Active     string
	SignedIn   bool
	Admin      bool
	Team       bool
	TeamName   string
	Subject    string
	SignOutTok string
	Source     string
	ReadAt     time.Time
}

func (c *Console) view(se session, title, active, source string) pageView {
	p := se.Principal
	return pageView{Title: title, Active: active, SignedIn: se.CSRF != "", Admin: p.IsAdmin(), Team: p.TeamID != 0,
		TeamName: p.TeamName, Subject: p.Subject, SignOutTok: se.CSRF, Source: source, ReadAt: c.cfg.Clock.Now().UTC()}
}

// render writes the page whole or, when its template fails, the error
// page: a half-written table would mislead.
func (c *Console) render(ctx *gin.Context, status int, page string, data any) {
	var buf bytes.Buffer
	if err := c.pages[page].Execute(&buf, data); err != nil {
		c.cfg.Logger.Error("console template failed", "page", page, "err", err)
		ctx.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("internal error"))
		return
	}
	ctx.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

// errorView is the error page's data.
type errorView struct {
	pageView
	Message string
}

// renderError shows a designed error page: what failed, in words.
func (c *Console) renderError(ctx *gin.Context, se session, status int, msg string) {
	c.render(ctx, status, "error", errorView{pageView: c.view(se, "Unavailable", "", ""), Message: msg})
}

// renderUnavailable shows the designed error page of a store that did not
// answer: 503, with the Retry-After a browser or a script may honour.
func (c *Console) renderUnavailable(ctx *gin.Context, se session, msg string) {
	ctx.Header("Retry-After", storeDownRetry)
	c.renderError(ctx, se, http.StatusServiceUnavailable, msg)
}

// budget bounds the database reads behind one page (Config.QueryTimeout).
func (c *Console) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.QueryTimeout)
}

// formatCredits shows micro-credits as credits with six decimals: exact.
func formatCredits(micro int64) string {
	sign := ""
	u := uint64(micro)
	if micro < 0 {
		sign, u = "-", uint64(-(micro+1))+1
	}
	return fmt.Sprintf("%s%d.%06d", sign, u/1_000_000, u%1_000_000)
}

// formatInt groups digits by thousands.
func formatInt(n int64) string {
	if n == math.MinInt64 {
		return strconv.FormatInt(n, 10)
	}
	s := strconv.FormatInt(max(n, -n), 10)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if n < 0 {
		return "-" + string(out)
	}
	return string(out)
}

// formatTime shows a UTC time to the second, or "never".
func formatTime(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return "never"
		}
		return v.UTC().Format("2006-01-02 15:04:05 UTC")
	case *time.Time:
		if v == nil {
			return "never"
		}
		return v.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return ""
}

// forbiddenTitle and forbiddenMessage are the page a team's session gets
// at a platform page: not "Unavailable", since nothing is down; the
// pages are the platform team's.
const (
	forbiddenTitle   = "Platform team only"
	forbiddenMessage = "The platform pages (nodes, platform models, teams, GPU-hours) are for the platform team: " +
		"sign in with the admin token or a JWT with the admin role to see them. Your team's pages are in the navigation above."
)

// renderForbidden shows the designed page of a session refused a page it
// may not open: 403, titled for what happened.
func (c *Console) renderForbidden(ctx *gin.Context, se session) {
	c.render(ctx, http.StatusForbidden, "error", errorView{pageView: c.view(se, forbiddenTitle, "", ""), Message: forbiddenMessage})
}
