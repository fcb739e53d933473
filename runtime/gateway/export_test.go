package gateway

import (
	"context"
	"k8s.io/utils/clock"
	"time"
)

// Helpers the white-box tests define that the black-box ones
// (package gateway_test) share.
var (
	ChatBody = chatBody
	Itoa     = itoa
)

// CheckError checks a refusal in the OpenAI shape (checkError).
var CheckError = checkError

// ServingRecheck is how long a served model is not asked about again.
const ServingRecheck = servingRecheck

// PromptEstimate is the gateway's estimate of a body's prompt.
var PromptEstimate = promptEstimate

// Request bodies nested as deep as a test asks (depth_test.go).
var (
	Nest        = nest
	WithTool    = withTool
	WithContent = withContent
)

// SetBalanceClock sets the clock of the gateway's view of balances: a
// test that must not see it age freezes it.
func (s *Server) SetBalanceClock(clk clock.PassiveClock) { s.balances.clock = clk }

// WaitLimit and WaitClosed: the early and lifecycle tests' waits.
const WaitLimit = waitLimit

var WaitClosed = waitClosed

// Internal bounds and names the black-box tests check against
// (pgfreeze_test.go, settle_test.go).
const (
	KeepTimeout          = keepTimeout
	CatalogLoadTimeout   = catalogLoadTimeout
	SettleTimeout        = settleTimeout
	RequestsEndTimeout   = requestsEndTimeout
	ShutdownSettleBudget = shutdownSettleBudget
	SettleAttempts       = settleAttempts
	SettleRetryPause     = settleRetryPause
	RequestIDHeader      = requestIDHeader
)

// SetPause replaces the pause between a failed settle's attempts: a test
// counts the pauses, checks their length and ends them.
func (s *Server) SetPause(pause func(ctx context.Context, d time.Duration) bool) { s.pause = pause }
