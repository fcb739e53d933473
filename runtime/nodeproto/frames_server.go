package nodeproto

import (
	"encoding/json"
	"fmt"
	"time"
)

// Welcome accepts a registration.
type Welcome struct {
	// Epoch numbers this connection of the node; ownership records carry it
	// so a late message from an older connection cannot overwrite a newer one.
	Epoch int64 `json:"epoch"`
	// HeartbeatInterval is the beat period in whole seconds.
	HeartbeatInterval int `json:"heartbeat_interval"`
	// Window is each request's initial chunk credit.
	Window         int    `json:"window"`
	OrchestratorID string `json:"orchestrator_id"`
	// Version is the server's software version.
	Version string `json:"version,omitempty"`
}

// Interval returns the heartbeat period as a duration.
func (w *Welcome) Interval() time.Duration {
	return time.Duration(w.HeartbeatInterval) * time.Second
}

// RetryAfter refuses a registration for now (rate limit, shutdown); the
// server closes with 1013 and the agent waits Seconds plus jitter.
type RetryAfter struct {
	Seconds int    `json:"seconds"`
	Reason  string `json:"reason,omitempty"`
}

// Wait returns the advised wait as a duration.
func (r *RetryAfter) Wait() time.Duration { return time.Duration(r.Seconds) * time.Second }

// Reconnect asks the node to open a new connection after AfterMS: the
// replica is going away, and the old socket only finishes its requests.
type Reconnect struct {
	AfterMS int64  `json:"after_ms"`
	Reason  string `json:"reason,omitempty"`
}

// After returns the wait before the new connection as a duration.
func (r *Reconnect) After() time.Duration { return time.Duration(r.AfterMS) * time.Millisecond }

// Assign starts a request on the node.
type Assign struct {
	RequestID string `json:"request_id"`
	// Model is the platform's model name.
	Model string `json:"model"`
	// Body is the engine's request body (served model name, stream and
	// include_usage set), sent to the engine as is.
	Body json.RawMessage `json:"body"`
}

// Cancel aborts a request; cancelling an unknown or finished one is a
// no-op.
type Cancel struct {
	RequestID string `json:"request_id"`
	// Reason says why, for logs and metrics ("client_gone", "timeout", …).
	Reason string `json:"reason,omitempty"`
}

// LoadModel asks the node to load a model with its configured loader.
type LoadModel struct {
	Name string `json:"name"`
}

// Drain stops new work on the node; in-flight requests finish.
type Drain struct {
	// DeadlineMS, when set, is how long after receipt in-flight requests may
	// run before the node cancels them; 0 means no deadline.
	DeadlineMS int64 `json:"deadline_ms,omitempty"`
}

// Deadline returns the drain's deadline as a duration, 0 for none.
func (d *Drain) Deadline() time.Duration { return time.Duration(d.DeadlineMS) * time.Millisecond }

// Window grants Chunks more chunk frames for a request.
type Window struct {
	RequestID string `json:"request_id"`
	Chunks    int    `json:"chunks"`
}

// Ack tells the node the server has these requests' done frames, so it
// can forget them.
type Ack struct {
	RequestIDs []string `json:"request_ids"`
}

// Type returns TypeWelcome.
func (*Welcome) Type() Type { return TypeWelcome }

// Type returns TypeRetryAfter.
func (*RetryAfter) Type() Type { return TypeRetryAfter }

// Type returns TypeReconnect.
func (*Reconnect) Type() Type { return TypeReconnect }

// Type returns TypeAssign.
func (*Assign) Type() Type { return TypeAssign }

// Type returns TypeCancel.
func (*Cancel) Type() Type { return TypeCancel }

// Type returns TypeLoadModel.
func (*LoadModel) Type() Type { return TypeLoadModel }

// Type returns TypeDrain.
func (*Drain) Type() Type { return TypeDrain }

// Type returns TypeWindow.
func (*Window) Type() Type { return TypeWindow }

// Type returns TypeAck.
func (*Ack) Type() Type { return TypeAck }

func (*Welcome) isFrame()    {}
func (*RetryAfter) isFrame() {}
func (*Reconnect) isFrame()  {}
func (*Assign) isFrame()     {}
func (*Cancel) isFrame()     {}
func (*LoadModel) isFrame()  {}
func (*Drain) isFrame()      {}
func (*Window) isFrame()     {}
func (*Ack) isFrame()        {}

// Validate checks that epoch, interval and window are positive and the
// orchestrator is named.
func (w *Welcome) Validate() error {
	const t = TypeWelcome
	switch {
	case w == nil:
		return nilFrame(t)
	case w.Epoch <= 0:
		return invalid(t, "epoch", "must be positive")
	case w.HeartbeatInterval <= 0:
		return invalid(t, "heartbeat_interval", "must be positive")
	case w.Window <= 0:
		return invalid(t, "window", "must be positive")
	case w.OrchestratorID == "":
		return invalid(t, "orchestrator_id", "is required")
	}
	return nil
}

// Validate checks that the wait is at least a second.
func (r *RetryAfter) Validate() error {
	if r == nil {
		return nilFrame(TypeRetryAfter)
	}
	if r.Seconds < 1 {
		return invalid(TypeRetryAfter, "seconds", "must be at least 1")
	}
	return nil
}

// Validate checks that the wait is not negative.
func (r *Reconnect) Validate() error {
	if r == nil {
		return nilFrame(TypeReconnect)
	}
	if r.AfterMS < 0 {
		return invalid(TypeReconnect, "after_ms", "must be non-negative")
	}
	return nil
}

// Validate checks the request id, the model and that the body is one JSON
// object.
func (a *Assign) Validate() error {
	const t = TypeAssign
	if a == nil {
		return nilFrame(t)
	}
	if err := checkID(t, "request_id", a.RequestID); err != nil {
		return err
	}
	if a.Model == "" {
		return invalid(t, "model", "is required")
	}
	return checkObject(t, "body", a.Body)
}

// Validate checks the request id.
func (c *Cancel) Validate() error {
	if c == nil {
		return nilFrame(TypeCancel)
	}
	return checkID(TypeCancel, "request_id", c.RequestID)
}

// Validate checks the model name.
func (l *LoadModel) Validate() error {
	if l == nil {
		return nilFrame(TypeLoadModel)
	}
	if l.Name == "" {
		return invalid(TypeLoadModel, "name", "is required")
	}
	return nil
}

// Validate checks that the deadline is not negative.
func (d *Drain) Validate() error {
	if d == nil {
		return nilFrame(TypeDrain)
	}
	if d.DeadlineMS < 0 {
		return invalid(TypeDrain, "deadline_ms", "must be non-negative")
	}
	return nil
}

// Validate checks the request id and that the grant is positive.
func (w *Window) Validate() error {
	if w == nil {
		return nilFrame(TypeWindow)
	}
	if w.Chunks <= 0 {
		return invalid(TypeWindow, "chunks", "must be positive")
	}
	return checkID(TypeWindow, "request_id", w.RequestID)
}

// Validate checks that at least one request is named and every id is valid.
func (a *Ack) Validate() error {
	if a == nil {
		return nilFrame(TypeAck)
	}
	if len(a.RequestIDs) == 0 {
		return invalid(TypeAck, "request_ids", "must name at least one request")
	}
	for i, id := range a.RequestIDs {
		if err := checkID(TypeAck, fmt.Sprintf("request_ids[%d]", i), id); err != nil {
			return err
		}
	}
	return nil
}
