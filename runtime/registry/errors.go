package registry

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotFound is returned by Get for a node without a live record.
	ErrNotFound = errors.New("registry: node not found")
	// ErrInvalidName is returned for an empty node id, request id or
	// model, one longer than a DNS name, or one containing braces or
	// whitespace, which would break the keys' hash tags.
	ErrInvalidName = errors.New("registry: invalid name")
	// ErrInvalidRecord is returned for a NodeRecord, Heartbeat or State
	// that cannot be stored as given.
	ErrInvalidRecord = errors.New("registry: invalid record")
	// ErrInvalidLimit is returned by AllowRegistration and
	// AllowNodeRegistration for a limit that is not positive.
	ErrInvalidLimit = errors.New("registry: limit must be positive")
	// ErrCorruptRecord is returned when a stored record cannot be read
	// back, which only another writer than this package can cause.
	ErrCorruptRecord = errors.New("registry: corrupt node record")
)

// checkName returns ErrInvalidName, with what was wrong, unless s can be a
// node id, request id or model name inside a key.
func checkName(what, s string) error {
	if s == "" || len(s) > maxNodeIDLen || strings.ContainsAny(s, "{} \t\r\n") {
		return fmt.Errorf("%w: %s %q", ErrInvalidName, what, s)
	}
	return nil
}

// invalid returns ErrInvalidRecord with what was wrong.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRecord}, args...)...)
}
