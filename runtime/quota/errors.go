package quota

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrQueueTimeout is returned by Wait when the queue limit passed before
	// the request got capacity; the gateway answers 503 queue_timeout.
	ErrQueueTimeout = errors.New("quota: queue wait limit passed")
	// ErrInvalidLimit is returned for a limit that is zero or negative. A
	// key without a limit is the caller's business: it skips the check.
	ErrInvalidLimit = errors.New("quota: limit must be positive")
	// ErrInvalidName is returned for an empty key id, request id or model,
	// or one containing braces or whitespace, which would break the keys'
	// hash tags or the queue's entry format.
	ErrInvalidName = errors.New("quota: invalid name")
)

// checkName returns ErrInvalidName, with what was wrong, unless s is a
// usable key id, request id or model name.
func checkName(what, s string) error {
	if s == "" || strings.ContainsAny(s, "{} \t\r\n") {
		return fmt.Errorf("%w: %s %q", ErrInvalidName, what, s)
	}
	return nil
}

// checkLimit returns ErrInvalidLimit unless limit is positive.
func checkLimit(what string, limit int64) error {
	if limit <= 0 {
		return fmt.Errorf("%w: %s = %d", ErrInvalidLimit, what, limit)
	}
	return nil
}
