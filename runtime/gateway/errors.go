package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/openai"
)

// rejection is an admission refusal: the status, the OpenAI error body, the
// Retry-After advice and the bounded reason label for metrics.
type rejection struct {
	status     int
	body       *openai.ErrorBody
	retryAfter time.Duration
	reason     string
}

func reject(status int, reason, typ, code, param, msg string) *rejection {
	return &rejection{status: status, reason: reason, body: openai.NewError(typ, code, param, msg)}
}

func (r *rejection) after(d time.Duration) *rejection {
	r.retryAfter = d
	return r
}

// write answers the client with the rejection.
func (s *Server) write(c *gin.Context, r *rejection) {
	if r.retryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(retryAfterSeconds(r.retryAfter)))
	}
	s.cfg.Metrics.rejected(r.reason, r.status)
	writeError(c, r.status, r.body)
}

// retryAfterSeconds rounds up: a client told "0" retries at once.
func retryAfterSeconds(d time.Duration) int {
	secs := int((d + time.Second - 1) / time.Second)
	return max(secs, 1)
}

// authRejection maps an authentication failure to 401, or 503 when the
// key store or JWKS could not be asked.
func authRejection(err error) *rejection {
	switch {
	case errors.Is(err, auth.ErrUnavailable):
		// The JWKS back-off says when a check can next succeed; a store
		// blip usually passes in seconds.
		retry := retryUnavailable
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) && ra.RetryAfter() > 0 {
			retry = ra.RetryAfter()
		}
		return reject(http.StatusServiceUnavailable, "auth_unavailable", openai.TypeUnavailable, "auth_unavailable", "",
			"credentials could not be verified right now; retry later").after(retry)
	case errors.Is(err, auth.ErrMissingCredential):
		return reject(http.StatusUnauthorized, "unauthenticated", openai.TypeAuthentication, "missing_api_key", "",
			"no credential: send Authorization: Bearer <api key or JWT>")
	case errors.Is(err, auth.ErrExpired):
		return reject(http.StatusUnauthorized, "unauthenticated", openai.TypeAuthentication, "expired_api_key", "",
			"the credential has expired")
	case errors.Is(err, auth.ErrRevoked):
		return reject(http.StatusUnauthorized, "unauthenticated", openai.TypeAuthentication, "revoked_api_key", "",
			"the credential has been revoked")
	default:
		return reject(http.StatusUnauthorized, "unauthenticated", openai.TypeAuthentication, "invalid_api_key", "",
			"the credential is not valid")
	}
}

// Retry-After advice for refusals that do not know better, each with its
// reason.
const (
	// retryUnavailable: a store or Redis blip usually passes in seconds.
	retryUnavailable = 2 * time.Second
	// retryNoCapacity: a stream frees a slot every few seconds at the
	// reference load of docs/requirements.md (3.8 requests/s per 8B replica).
	retryNoCapacity = 5 * time.Second
)

func unavailable(what string) *rejection {
	return reject(http.StatusServiceUnavailable, what+"_unavailable", openai.TypeUnavailable, "service_unavailable", "",
		"the "+what+" service is unavailable; retry later").after(retryUnavailable)
}
