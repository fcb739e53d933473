// Package gateway is the platform's HTTP front door: the OpenAI-compatible
// API, the admission pipeline in front of it, and the relay that streams an
// engine's answer back to the client. It depends on a dispatch.Dispatcher
// for the engine side and never on the orchestrator's internals.
//
// The order of a request's checks is the cheapest refusal first (chat.go,
// exchange.open): the credential, then the key's limits — before the body
// is read, so a key over them costs one Redis round trip whatever it
// sends — then the body, read and decoded under the process's body budget
// (bodybudget.go), which bounds the memory of the bodies being decoded at
// once, then the body's checks, the model at zero, the reservation.
//
// POST /v1/responses (responses.go) is the same exchange with another
// body decoder and answer writer: its body, stateless Responses fields, is
// translated to a chat completion at decode, and the engine's chat stream
// is written as Responses events or one response object
// (responses_relay.go), its usage the same bill. TestResponsesOfficialClient
// holds it to the official SDK.
//
// A caller of a model at zero (no ready replica, as the orchestrators
// publish it in package coldstart) is held before the reservation
// (atzero.go, wakehold.go) until the model's first replica is ready, up to
// the wake hold (8 min, within the OpenAI SDKs' request timeout), then
// goes on; a hold that passes is a 503 with a Retry-After of the load time
// left. A held caller keeps its key's stream slot and no ledger row, and
// its demand is recorded for the autoscaler when the ledger says its
// team's balance covers the request.
//
// A request's hold on the platform — its key's limits in Redis (a stream
// slot, the day's tokens, the minute) and its row in the ledger — is one
// admission (lifecycle.go) with an explicit state: pending, admitted,
// reserving (a reservation running while the engine prefills), held,
// released (the limits ended before a streamed answer's end), closed. The
// handler defers its Close once, and Close is idempotent: whatever state
// the request reached and however it ended (an answer, a refusal, the
// client gone, the engine dead, a timeout, a panic), the stream slot is
// released exactly once, the row settled or cancelled exactly once, and
// the model's queue woken, in that order. TestAdmissionLifecycle walks the
// states × the endings through the HTTP API, TestAdmissionCloseFromEveryState
// each state × each outcome at the type.
//
// What a request is billed, and what its client is shown as its usage,
// is one rule (billed, lifecycle.go, over ledger.BoundUsage): the engine's
// counts within the tolerance of the text the relay counted and the
// prompt's words, within the reservation. The relay rewrites the usage it
// shows to that, and ends a stream whose engine sends an event with a
// duplicate key (model_name.go). TestImplausibleUsageIsBilledFromTheRelayedText
// drives a hostile engine through it.
//
// A request its key's limits refuse (429, checkLimits) is counted per key
// and minute through Config.Refusals, for the console's keys page; an
// admitted request writes nothing for it.
package gateway
