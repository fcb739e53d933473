package nodeproto

import (
	"errors"
	"time"

	"github.com/llmplat/llmplat/runtime/openai"
)

// Version is the protocol's major version, the "v" member of every frame.
// Minor changes only add optional fields or frame types and keep it.
const Version = 1

// Timing both ends of a connection agree on.
const (
	// HeartbeatInterval is how often a node beats (docs/requirements.md: every 5 s); the
	// server announces it in welcome.
	HeartbeatInterval = 5 * time.Second
	// NodeTTL is the life of a node's record without a beat: three missed
	// 5 s heartbeats (docs/requirements.md).
	NodeTTL = 3 * HeartbeatInterval
	// RegisterTimeout bounds the wait for register after the upgrade: a
	// socket that never registers holds a slot for nothing (slow loris).
	RegisterTimeout = 10 * time.Second
	// ReadTimeout is the silence after which either end drops the link:
	// three missed heartbeats at the server, one and a half pings at the
	// agent, so a half-open link is found.
	ReadTimeout = 15 * time.Second
	// PingInterval is the server's WebSocket ping period: it lets the agent
	// see a dead server within its ReadTimeout.
	PingInterval = 10 * time.Second
	// WriteTimeout bounds one frame's write: a peer that cannot take one
	// frame in 10 s is gone, and a timed-out write leaves the socket unusable.
	WriteTimeout = 10 * time.Second
	// ReconnectSpread is the range [0, 10 s) over which a replica that goes
	// away spreads its nodes' reconnect after_ms, so they do not arrive at once.
	ReconnectSpread = 10 * time.Second
)

// DefaultWindow is the per-request credit the server grants in welcome: 32
// chunks are about 8 KiB of buffered events, inside the 32 KiB memory
// budget of one stream.
const DefaultWindow = 32

// Read limits. A receiver sets its WebSocket read limit to its own, and
// Encode refuses a frame its receiver would refuse.
const (
	// ServerReadLimit bounds a frame a node sends: one chunk carries one SSE
	// event of at most openai.MaxEventBytes, plus 16 KiB for the envelope.
	ServerReadLimit = openai.MaxEventBytes + 16<<10
	// AgentReadLimit bounds a frame the server sends: one assign carries a
	// request body of at most the gateway's MaxBodyBytes (8 MiB), plus
	// 64 KiB for the envelope. It must be set explicitly: WebSocket
	// libraries default to far less.
	AgentReadLimit = 8<<20 + 64<<10
	// MaxFrameBytes is the largest frame of any type; Decode refuses a
	// longer input before parsing it.
	MaxFrameBytes = AgentReadLimit
)

// Reconnect backoff.
const (
	// BackoffBase is the first ceiling of the full-jitter draw (docs/requirements.md: 1 s,
	// 2 s, 4 s, …).
	BackoffBase = time.Second
	// BackoffCap caps the ceiling (docs/requirements.md: capped at 60 s).
	BackoffCap = 60 * time.Second
	// BackoffResetAfter is how long a link must stay up before the schedule
	// starts again at BackoffBase: a link that flaps must not reset to 1 s
	// each time.
	BackoffResetAfter = 30 * time.Second
	// RetryAfterJitter is added on top of a server's retry_after, so agents
	// told the same number of seconds do not return in the same instant.
	RetryAfterJitter = time.Second
	// MaxAdvice caps how long a server's advice can park an agent: longer
	// advice is a bug, and a node idle for more than 5 minutes is capacity
	// lost.
	MaxAdvice = 5 * time.Minute
)

// CloseCode is a WebSocket close status the protocol uses.
type CloseCode int

// Close codes of the protocol.
const (
	CloseNormal        CloseCode = 1000 // the peer is done
	CloseGoingAway     CloseCode = 1001 // a replica is leaving, after reconnect
	CloseProtocolError CloseCode = 1002 // bad first frame, version, credit or JSON
	ClosePolicy        CloseCode = 1008 // bad or revoked token
	CloseTooLarge      CloseCode = 1009 // a frame over the read limit
	CloseServerError   CloseCode = 1011 // the server failed
	CloseTryAgainLater CloseCode = 1013 // after retry_after
	CloseSuperseded    CloseCode = 4000 // a newer connection of the same node took over
)

// CloseCodeOf returns the close code a decode or encode error calls for,
// and false when the error does not end the connection (nil, or an unknown
// frame type, which the receiver ignores).
func CloseCodeOf(err error) (CloseCode, bool) {
	switch {
	case err == nil, errors.Is(err, ErrUnknownType):
		return 0, false
	case errors.Is(err, ErrTooLarge):
		return CloseTooLarge, true
	case errors.Is(err, ErrVersion), errors.Is(err, ErrMalformed), errors.Is(err, ErrInvalid):
		return CloseProtocolError, true
	default:
		return CloseServerError, true
	}
}
