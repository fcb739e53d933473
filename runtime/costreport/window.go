package costreport

import (
	"errors"
	"fmt"
	"time"
)

// HoursPerWeek scales idle GPU-hours to the weekly figure docs/requirements.md asks for.
const HoursPerWeek = 7 * 24.0

// ErrBadWindow is returned for a window that does not end after it starts.
var ErrBadWindow = errors.New("bad report window")

// Window is the half-open time range [From, To) a report covers.
type Window struct {
	From time.Time
	To   time.Time
}

// Validate checks that the window ends after it starts.
func (w Window) Validate() error {
	if !w.To.After(w.From) {
		return fmt.Errorf("%w: to %s is not after from %s", ErrBadWindow,
			w.To.UTC().Format(time.RFC3339), w.From.UTC().Format(time.RFC3339))
	}
	return nil
}

// Duration is the window's length.
func (w Window) Duration() time.Duration { return w.To.Sub(w.From) }

// Hours is the window's length in hours.
func (w Window) Hours() float64 { return w.Duration().Hours() }

// clip returns the part of [from, to) inside w, and false when none is.
func (w Window) clip(from, to time.Time) (Window, bool) {
	if from.Before(w.From) {
		from = w.From
	}
	if to.After(w.To) {
		to = w.To
	}
	return Window{From: from, To: to}, to.After(from)
}

// hourBuckets splits w into the UTC clock hours it overlaps, the first and
// last clipped to w. Each bucket's key is the start of its clock hour.
func (w Window) hourBuckets() []Window {
	var out []Window
	for h := w.From.UTC().Truncate(time.Hour); h.Before(w.To); h = h.Add(time.Hour) {
		if b, ok := w.clip(h, h.Add(time.Hour)); ok {
			out = append(out, b)
		}
	}
	return out
}

// ceilMicro rounds t up to the microsecond, the precision rows are stamped
// at, so a bound keeps its meaning on PostgreSQL, which would round it to
// the nearest microsecond: for a row time r, r >= t iff r >= ceilMicro(t).
func ceilMicro(t time.Time) time.Time {
	u := t.UTC().Truncate(time.Microsecond)
	if u.Before(t) {
		u = u.Add(time.Microsecond)
	}
	return u
}
