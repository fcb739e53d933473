package console

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/auth"
)

const (
	// maxCredentialField bounds the credential field: a JWT with many
	// claims stays under 4 KiB, as the gateway's own bound says.
	maxCredentialField = 8 << 10
	// csrfTTL is how long a sign-in form stays usable: a person who opens
	// it and comes back within the hour need not reload it.
	csrfTTL = time.Hour
)

// signInView is the sign-in page's data.
type signInView struct {
	pageView
	CSRF    string
	Problem string
}

// signInForm shows the sign-in form with a fresh anti-forgery token, the
// same in the form and in an HttpOnly cookie (double submit).
func (c *Console) signInForm(ctx *gin.Context) {
	c.renderSignIn(ctx, http.StatusOK, "")
}

func (c *Console) renderSignIn(ctx *gin.Context, status int, problem string) {
	// A browser that has a token keeps it, so that a form open in another
	// tab stays valid; its life restarts.
	token, err := ctx.Cookie(csrfCookie)
	if err != nil || len(token) != newTokenLen {
		token = newToken()
	}
	setCookie(ctx, csrfCookie, token, int(csrfTTL/time.Second))
	c.render(ctx, status, "signin", signInView{pageView: c.view(session{}, "Sign in", "", "the credential you paste"), CSRF: token, Problem: problem})
}

// signIn exchanges a team API key, a JWT or the admin token (sent in the
// form body, never in a URL) for a session cookie. The credential is
// verified exactly as the gateway verifies a Bearer header and then
// forgotten: only the principal is kept, in Redis.
func (c *Console) signIn(ctx *gin.Context) {
	if !sameOrigin(ctx.Request) {
		c.renderSignIn(ctx, http.StatusForbidden, "This form must be sent from the console's own page.")
		return
	}
	ctx.Request.Body = http.MaxBytesReader(ctx.Writer, ctx.Request.Body, maxCredentialField+1024)
	cookie, _ := ctx.Cookie(csrfCookie)
	if !sameToken(cookie, ctx.PostForm("csrf")) {
		c.renderSignIn(ctx, http.StatusForbidden, "The form expired or was not sent from this page; try again.")
		return
	}
	cred := strings.TrimSpace(ctx.PostForm("credential"))
	if cred == "" || len(cred) > maxCredentialField {
		c.renderSignIn(ctx, http.StatusUnauthorized, "Paste a team API key, a JWT or the admin token.")
		return
	}
	addr := clientAddr(ctx.Request)
	if err := c.checkSignIn(ctx.Request.Context(), cred, addr); err != nil {
		c.refuseSignIn(ctx, addr, err)
		return
	}
	p, err := c.cfg.Authenticate(ctx.Request.Context(), "Bearer "+cred)
	if err != nil {
		status, msg := http.StatusUnauthorized, "That credential was not accepted."
		if errors.Is(err, auth.ErrUnavailable) {
			status, msg = http.StatusServiceUnavailable, "Credentials cannot be checked right now; try again shortly."
		} else if ferr := c.recordFailure(ctx.Request.Context(), cred, addr); ferr != nil {
			c.cfg.Logger.Warn("console sign-in failure not counted", "client", addr, "err", ferr)
		}
		c.cfg.Logger.Info("console sign-in refused", "client", addr, "err", err)
		c.renderSignIn(ctx, status, msg)
		return
	}
	if p.TeamID == 0 && !p.IsAdmin() {
		c.renderSignIn(ctx, http.StatusForbidden, "That credential belongs to no team.")
		return
	}
	id, _, err := c.sessions.create(ctx.Request.Context(), p)
	if err != nil {
		c.cfg.Logger.Warn("console session not created", "err", err)
		c.renderSignIn(ctx, http.StatusServiceUnavailable, "Sign-in is unavailable: the session store (Redis) is not answering.")
		return
	}
	c.cfg.Logger.Info("console sign-in", "subject", p.Subject, "team_id", p.TeamID, "role", p.Role.String())
	setCookie(ctx, csrfCookie, "", -1)
	setCookie(ctx, sessionCookie, id, int(sessionTTL/time.Second))
	ctx.Redirect(http.StatusSeeOther, Path+"/")
}

// signOut ends the session in Redis, so its cookie stops working on every
// replica, and clears the cookie. The form carries the session's CSRF
// token. It needs Redis alone: signing out works while the database is
// down.
func (c *Console) signOut(ctx *gin.Context) {
	id, _ := ctx.Cookie(sessionCookie)
	var se session
	err := errNoSession
	if id != "" {
		se, err = c.readSession(ctx.Request.Context(), id)
	}
	if c.refuseUnavailable(ctx, err) {
		return
	}
	if err != nil || !sameOrigin(ctx.Request) || !sameToken(se.CSRF, ctx.PostForm("csrf")) {
		ctx.Redirect(http.StatusSeeOther, Path+"/signin")
		return
	}
	if err := c.sessions.end(ctx.Request.Context(), id); err != nil {
		c.renderError(ctx, se, http.StatusServiceUnavailable, "Sign-out did not reach the session store (Redis); try again.")
		return
	}
	setCookie(ctx, sessionCookie, "", -1)
	ctx.Redirect(http.StatusSeeOther, Path+"/signin")
}

// refuseSignIn answers an attempt checkSignIn refused: 429 with the time
// left in the window that refused it, or 503 when Redis did not answer.
func (c *Console) refuseSignIn(ctx *gin.Context, addr string, err error) {
	var l *lockout
	if !errors.As(err, &l) {
		c.cfg.Logger.Warn("console sign-in limit unavailable", "err", err)
		c.renderSignIn(ctx, http.StatusServiceUnavailable, "Sign-in is unavailable: the session store (Redis) is not answering. Try again shortly.")
		return
	}
	wait := max(int(math.Ceil(l.retry.Seconds())), 1)
	c.cfg.Logger.Info("console sign-in locked out", "client", addr, "by_address", l.byAddress, "retry_after_s", wait)
	ctx.Header("Retry-After", strconv.Itoa(wait))
	msg := fmt.Sprintf("Too many failed sign-ins with this credential; try again in %s.", waitText(wait))
	if l.byAddress {
		msg = fmt.Sprintf("Too many failed sign-ins from this address, including with this credential; try again in %s.", waitText(wait))
	}
	c.renderSignIn(ctx, http.StatusTooManyRequests, msg)
}

// waitText says a wait in whole minutes, or seconds under one.
func waitText(seconds int) string {
	if seconds < 60 {
		return fmt.Sprintf("%d s", seconds)
	}
	return fmt.Sprintf("%d min", (seconds+59)/60)
}

// clientAddr is the client's address: the connection's peer, which behind
// a load balancer that sends PROXY headers is the client the header names
// (package proxyheader, on the gateway's listener). Forwarded headers are
// not trusted: anyone can write them.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// sameOrigin refuses a form posted from another site: when the browser
// names the origin, it must be this host. SameSite=Strict cookies and the
// CSRF token already stop a forged post; this is the third lock.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}
