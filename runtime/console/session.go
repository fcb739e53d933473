package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
)

const (
	// sessionTTL is a session's whole life: short, so a forgotten tab on a
	// shared screen stops showing a team's money within the hour; never
	// longer than the credential it was exchanged for.
	sessionTTL = 30 * time.Minute
	// sessionCookie names the session cookie; csrfCookie the signed-out
	// visitor's anti-forgery token, checked against the sign-in form's.
	sessionCookie = "llmplat_console"
	csrfCookie    = "llmplat_console_csrf"
	// redisCallTimeout bounds one session read or write: Redis answers in
	// a millisecond, and a page must not hang on a frozen one.
	redisCallTimeout = 2 * time.Second
	// storeDownRetry is the Retry-After, in seconds, of a page refused
	// because Redis or PostgreSQL is down: a restarted or failed-over
	// server is back in well under a minute.
	storeDownRetry = "30"
	// tokenBytes is the entropy of a session id and a CSRF token.
	tokenBytes = 32
)

// errNoSession is a missing, unknown or ended session.
var errNoSession = errors.New("no session")

// session is what Redis keeps for a signed-in browser: the verified
// principal (never the credential itself) and the session's CSRF token.
type session struct {
	Principal auth.Principal `json:"principal"`
	CSRF      string         `json:"csrf"`
	Expires   time.Time      `json:"expires"`
}

// sessions keeps sessions in Redis under the SHA-256 of their id, so that
// a dump of Redis holds no cookie that works.
type sessions struct {
	rdb    redis.UniversalClient
	prefix string
	clock  clock.PassiveClock
}

func (s *sessions) key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.prefix + "session:" + hex.EncodeToString(sum[:])
}

// create stores a session for p and returns its id.
func (s *sessions) create(ctx context.Context, p auth.Principal) (string, session, error) {
	id, csrf := newToken(), newToken()
	ttl := sessionTTL
	if !p.ExpiresAt.IsZero() {
		ttl = min(ttl, p.ExpiresAt.Sub(s.clock.Now()))
	}
	if ttl <= 0 {
		return "", session{}, fmt.Errorf("create session: %w", auth.ErrExpired)
	}
	se := session{Principal: p, CSRF: csrf, Expires: s.clock.Now().Add(ttl)}
	b, err := json.Marshal(se)
	if err != nil {
		return "", session{}, fmt.Errorf("create session: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	if err := s.rdb.Set(ctx, s.key(id), b, ttl).Err(); err != nil {
		return "", session{}, fmt.Errorf("create session: %w", err)
	}
	return id, se, nil
}

// get returns the session id names, or errNoSession.
func (s *sessions) get(ctx context.Context, id string) (session, error) {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	b, err := s.rdb.Get(ctx, s.key(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return session{}, errNoSession
	}
	if err != nil {
		return session{}, fmt.Errorf("read session: %w", err)
	}
	var se session
	if err := json.Unmarshal(b, &se); err != nil {
		return session{}, fmt.Errorf("read session: %w", err)
	}
	return se, nil
}

// end deletes the session on every replica at once: they all read it here.
func (s *sessions) end(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	if err := s.rdb.Del(ctx, s.key(id)).Err(); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// newTokenLen is the length of a token newToken returns.
var newTokenLen = len(newToken())

func newToken() string {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// sameToken compares two tokens in constant time; an empty one never
// matches.
func sameToken(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// secure reports whether the browser reached us over TLS, here or at the
// edge, so cookies are marked Secure there.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// setCookie sets an HttpOnly, SameSite=Strict cookie scoped to the console.
func setCookie(ctx *gin.Context, name, value string, maxAge int) {
	http.SetCookie(ctx.Writer, &http.Cookie{Name: name, Value: value, Path: Path, MaxAge: maxAge,
		HttpOnly: true, Secure: secure(ctx.Request), SameSite: http.SameSiteStrictMode})
}

// ctxSession is the gin context key of the signed-in session.
const ctxSession = "console_session"

// errStoreDown is a session that could not be read: Redis did not answer.
var errStoreDown = errors.New("console: the session store (Redis) is not answering")

// storeDownMessage is what a page says when the sessions cannot be read.
const storeDownMessage = "The console is unavailable: its session store (Redis) is not answering, " +
	"so no one's sign-in can be checked. Try again shortly."

// errDatabaseDown is a session whose API key could not be checked: the
// platform database did not answer within the page's budget.
var errDatabaseDown = errors.New("console: the platform database is not answering")

// databaseDownMessage is what a page says when a session's key cannot be
// checked.
const databaseDownMessage = "The console is unavailable: the platform database is not answering, " +
	"so your key cannot be checked. You are still signed in; try again shortly."

// refuseUnavailable answers the designed 503 page, with Retry-After, when
// err says a store did not answer, and reports whether it did.
func (c *Console) refuseUnavailable(ctx *gin.Context, err error) bool {
	return c.refuseUnavailableTo(ctx, session{}, err)
}

// refuseUnavailableTo is refuseUnavailable for the session se Redis still
// holds: when only the database is down, the page keeps the signed-in
// frame (the navigation and the sign-out form), as its message says the
// visitor is still signed in.
func (c *Console) refuseUnavailableTo(ctx *gin.Context, se session, err error) bool {
	switch {
	case errors.Is(err, errStoreDown):
		c.renderUnavailable(ctx, session{}, storeDownMessage)
	case errors.Is(err, errDatabaseDown):
		c.renderUnavailable(ctx, se, databaseDownMessage)
	default:
		return false
	}
	return true
}

// session returns the browser's live session: errNoSession when it has
// none (or it ended), errStoreDown when Redis cannot say, errDatabaseDown
// (with the session Redis holds, for the error page's frame) when
// PostgreSQL cannot say whether its key still works. A session
// exchanged for an API key ends as soon as the key stops working — gone,
// revoked, expired or moved to another team: it is bound to that key, not
// only to its team — and never because the database did not answer.
func (c *Console) session(ctx *gin.Context) (session, error) {
	id, err := ctx.Cookie(sessionCookie)
	if err != nil || id == "" {
		return session{}, errNoSession
	}
	se, err := c.readSession(ctx.Request.Context(), id)
	if err != nil {
		return session{}, err
	}
	if p := se.Principal; p.Kind == auth.KindAPIKey {
		rctx, cancel := c.budget(ctx.Request.Context())
		defer cancel()
		k, err := c.cfg.Directory.GetKey(rctx, p.KeyID)
		switch {
		case err != nil && !errors.Is(err, admin.ErrNotFound):
			c.cfg.Logger.Warn("console session's key cannot be checked", "key_id", p.KeyID, "err", err)
			return se, errDatabaseDown
		case err != nil, k.StatusAt(c.cfg.Clock.Now()) != adminwire.KeyActive, k.TeamID != p.TeamID:
			_ = c.sessions.end(ctx.Request.Context(), id)
			return session{}, errNoSession
		}
	}
	return se, nil
}

// readSession reads the session id names from Redis alone: errNoSession
// when there is none, errStoreDown when Redis does not answer.
func (c *Console) readSession(ctx context.Context, id string) (session, error) {
	se, err := c.sessions.get(ctx, id)
	switch {
	case errors.Is(err, errNoSession):
		return session{}, errNoSession
	case err != nil:
		c.cfg.Logger.Warn("console session store unavailable", "err", err)
		return session{}, errStoreDown
	}
	return se, nil
}

// requireSession lets a request through with a live session, and only an
// admin's to the platform pages; anyone else goes to the sign-in form.
func (c *Console) requireSession(platform bool) gin.HandlerFunc {
	return func(ctx *gin.Context) {
		se, err := c.session(ctx)
		if c.refuseUnavailableTo(ctx, se, err) {
			ctx.Abort()
			return
		}
		if err != nil {
			ctx.Redirect(http.StatusSeeOther, Path+"/signin")
			ctx.Abort()
			return
		}
		switch {
		case platform && !se.Principal.IsAdmin():
			c.renderForbidden(ctx, se)
			ctx.Abort()
			return
		case !platform && se.Principal.TeamID == 0:
			ctx.Redirect(http.StatusSeeOther, Path+"/platform/nodes")
			ctx.Abort()
			return
		}
		ctx.Set(ctxSession, se)
		ctx.Next()
	}
}

// current is the session requireSession found.
func current(ctx *gin.Context) session {
	se, _ := ctx.Get(ctxSession)
	s, _ := se.(session)
	return s
}
