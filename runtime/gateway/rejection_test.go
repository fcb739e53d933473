package gateway

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/dispatch"
)

// TestDispatchRejectionStatus: a 503 from an engine or the orchestrator
// (busy, no other node) stays a 503 with its Retry-After; other 5xx are
// the upstream's failure, 502; a 4xx passes as it is.
func TestDispatchRejectionStatus(t *testing.T) {
	for _, tt := range []struct{ engine, want int }{
		{http.StatusServiceUnavailable, http.StatusServiceUnavailable},
		{http.StatusInternalServerError, http.StatusBadGateway},
		{http.StatusGatewayTimeout, http.StatusBadGateway},
		{http.StatusBadRequest, http.StatusBadRequest},
	} {
		r := dispatchRejection(context.Background(), &dispatch.Error{Status: tt.engine, RetryAfter: 5 * time.Second})
		if r.status != tt.want || r.retryAfter != 5*time.Second {
			t.Errorf("engine %d → %d (Retry-After %v), want %d with the engine's Retry-After", tt.engine, r.status, r.retryAfter, tt.want)
		}
	}
}
