package gateway

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/openai"
)

// microPerCredit converts the ledger's micro-credits to credits (USD).
const microPerCredit = 1e6

// UsageReport is the body of GET /v1/usage.
type UsageReport struct {
	Object string       `json:"object"`
	Team   string       `json:"team"`
	From   time.Time    `json:"from"`
	To     time.Time    `json:"to"`
	Data   []UsageEntry `json:"data"`
}

// UsageEntry is one model's usage in a UsageReport.
type UsageEntry struct {
	Model            string  `json:"model"`
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	TotalTokens      int64   `json:"total_tokens"`
	CostMicrocredits int64   `json:"cost_microcredits"`
	CostCredits      float64 `json:"cost_credits"`
}

// usage serves GET /v1/usage?from=&to=: tokens and cost per model for the
// caller's team. The team comes from the verified credential, never from
// the request, so a key can only ever read its own team's usage.
func (s *Server) usage(c *gin.Context) {
	p, ok := s.principal(c)
	if !ok {
		return
	}
	now := s.cfg.Clock.Now().UTC()
	from, err := parseTime(c.Query("from"), time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		writeError(c, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_value", "from", "from must be RFC 3339 or YYYY-MM-DD"))
		return
	}
	to, err := parseTime(c.Query("to"), now)
	if err != nil {
		writeError(c, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_value", "to", "to must be RFC 3339 or YYYY-MM-DD"))
		return
	}
	if !to.After(from) {
		writeError(c, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_value", "to", "to must be after from"))
		return
	}
	// The read has the ledger's budget: a frozen database answers 503 in
	// it rather than holding the request until the thaw.
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.LedgerTimeout)
	rows, err := s.cfg.Ledger.Usage(ctx, p.TeamID, from, to)
	cancel()
	if err != nil {
		s.write(c, unavailable("ledger"))
		return
	}
	rep := UsageReport{Object: "usage", Team: p.TeamName, From: from, To: to, Data: []UsageEntry{}}
	for _, r := range rows {
		rep.Data = append(rep.Data, UsageEntry{
			Model: r.Model, Requests: r.Requests, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
			TotalTokens: addSaturating(r.PromptTokens, r.CompletionTokens), CostMicrocredits: r.CostMicrocredits,
			CostCredits: float64(r.CostMicrocredits) / microPerCredit,
		})
	}
	c.JSON(http.StatusOK, rep)
}

// addSaturating returns a+b for the non-negative sums of a usage report,
// or math.MaxInt64 where that would wrap: a total never turns negative.
func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// parseTime reads RFC 3339 or a UTC date; empty means def.
func parseTime(s string, def time.Time) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	return time.Parse(time.DateOnly, s)
}

// listModels serves GET /v1/models: the models the caller's key may use.
func (s *Server) listModels(c *gin.Context) {
	p, ok := s.principal(c)
	if !ok {
		return
	}
	models, err := s.cfg.Catalog.Models(c.Request.Context())
	if err != nil {
		s.write(c, unavailable("catalog"))
		return
	}
	out := openai.ModelList{Object: "list", Data: []openai.Model{}}
	for _, m := range models {
		if p.AllowsModel(m.ID) {
			out.Data = append(out.Data, m)
		}
	}
	c.JSON(http.StatusOK, out)
}
