package nodeproto

import (
	"errors"
	"fmt"
	"log/slog"
)

// Type names a frame's kind: the "type" member of every frame.
type Type string

// Frame types. Server means the orchestrator; node means the node agent.
const (
	TypeRegister   Type = "register"    // node → server, first frame
	TypeWelcome    Type = "welcome"     // server → node, answer to register
	TypeRetryAfter Type = "retry_after" // server → node, then close 1013
	TypeReconnect  Type = "reconnect"   // server → node, replica going away
	TypeAssign     Type = "assign"      // server → node, start a request
	TypeCancel     Type = "cancel"      // server → node, abort a request
	TypeLoadModel  Type = "load_model"  // server → node
	TypeDrain      Type = "drain"       // server → node, no new work
	TypeWindow     Type = "window"      // server → node, more chunk credit
	TypeAck        Type = "ack"         // server → node, done records received
	TypeChunk      Type = "chunk"       // node → server, one engine event
	TypeDone       Type = "done"        // node → server, end of a request
	TypeHeartbeat  Type = "heartbeat"   // node → server, every 5 s
	TypeError      Type = "error"       // both ways: a request's or the connection's error
)

// Types lists every frame type this version speaks.
func Types() []Type {
	return []Type{TypeRegister, TypeWelcome, TypeRetryAfter, TypeReconnect, TypeAssign,
		TypeCancel, TypeLoadModel, TypeDrain, TypeWindow, TypeAck, TypeChunk, TypeDone,
		TypeHeartbeat, TypeError}
}

// FromNode reports whether a node may send frames of type t.
func (t Type) FromNode() bool {
	switch t {
	case TypeRegister, TypeChunk, TypeDone, TypeHeartbeat, TypeError:
		return true
	}
	return false
}

// FromServer reports whether the server may send frames of type t.
func (t Type) FromServer() bool {
	switch t {
	case TypeWelcome, TypeRetryAfter, TypeReconnect, TypeAssign, TypeCancel,
		TypeLoadModel, TypeDrain, TypeWindow, TypeAck, TypeError:
		return true
	}
	return false
}

// readLimit is the largest frame of type t its receiver accepts.
func (t Type) readLimit() int {
	if t.FromNode() {
		return ServerReadLimit // error goes both ways; the smaller limit holds
	}
	return AgentReadLimit
}

// Frame is one protocol message. The frame types are the pointer types of
// this package (*Chunk, *Assign, …), so a type switch on a decoded Frame
// names them with a star.
type Frame interface {
	// Type returns the frame's "type" member.
	Type() Type
	// Validate reports a missing or out-of-range field as an error wrapping
	// ErrInvalid.
	Validate() error
	isFrame()
}

// newFrame returns an empty frame of type t, or nil for an unknown type.
func newFrame(t Type) Frame {
	switch t {
	case TypeRegister:
		return new(Register)
	case TypeWelcome:
		return new(Welcome)
	case TypeRetryAfter:
		return new(RetryAfter)
	case TypeReconnect:
		return new(Reconnect)
	case TypeAssign:
		return new(Assign)
	case TypeCancel:
		return new(Cancel)
	case TypeLoadModel:
		return new(LoadModel)
	case TypeDrain:
		return new(Drain)
	case TypeWindow:
		return new(Window)
	case TypeAck:
		return new(Ack)
	case TypeChunk:
		return new(Chunk)
	case TypeDone:
		return new(Done)
	case TypeHeartbeat:
		return new(Heartbeat)
	case TypeError:
		return new(Error)
	}
	return nil
}

// RequestIDOf returns the request a frame belongs to, or "" for frames of
// the connection (register, heartbeat, a connection error, …).
func RequestIDOf(f Frame) string {
	switch f := f.(type) {
	case *Chunk:
		return f.RequestID
	case *Done:
		return f.RequestID
	case *Assign:
		return f.RequestID
	case *Cancel:
		return f.RequestID
	case *Window:
		return f.RequestID
	case *Error:
		return f.RequestID
	}
	return ""
}

// Errors of the codec, classified with errors.Is.
var (
	// ErrUnknownType means the frame's type is not one this version speaks;
	// the receiver ignores the frame and keeps the connection.
	ErrUnknownType = errors.New("nodeproto: unknown frame type")
	// ErrVersion means the frame's major version is not Version; the
	// receiver closes with 1002. Its errors are *VersionError.
	ErrVersion = errors.New("nodeproto: unsupported protocol version")
	// ErrTooLarge means the frame exceeds its receiver's read limit.
	ErrTooLarge = errors.New("nodeproto: frame too large")
	// ErrMalformed means the input is not a JSON object with the members
	// and member types of a frame.
	ErrMalformed = errors.New("nodeproto: malformed frame")
	// ErrInvalid means a required field is missing or out of range.
	ErrInvalid = errors.New("nodeproto: invalid frame")
)

// VersionError is a frame of a major version the receiver does not speak.
// Its message suits a close reason.
type VersionError struct {
	Got int64
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("unsupported protocol version %d; speaks %d", e.Got, Version)
}

// Is makes errors.Is(err, ErrVersion) true.
func (e *VersionError) Is(target error) bool { return target == ErrVersion }

// invalid returns a validation error for a field of a frame type.
func invalid(t Type, field, why string) error {
	return fmt.Errorf("%w: %s.%s %s", ErrInvalid, t, field, why)
}

// Secret is a credential carried in a frame. It encodes as its plain value
// but prints and logs as a placeholder, so a token never reaches a log.
type Secret string

// String returns a placeholder instead of the secret.
func (Secret) String() string { return "[redacted]" }

// GoString returns a placeholder instead of the secret.
func (Secret) GoString() string { return `"[redacted]"` }

// LogValue returns a placeholder instead of the secret.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }
