//go:build !hoptrace

package hoptrace

import "time"

// On is false without the hoptrace tag: nothing is recorded, and call
// sites guarded by it compile to nothing.
const On = false

// Key returns "" without the hoptrace tag.
func Key([]byte) string { return "" }

// Now returns the zero time without the hoptrace tag.
func Now() time.Time { return time.Time{} }

// Mark does nothing without the hoptrace tag.
func Mark(string, Point) {}

// MarkAt does nothing without the hoptrace tag.
func MarkAt(string, Point, time.Time) {}

// Alias does nothing without the hoptrace tag.
func Alias(string, []byte) {}

// Snapshot returns no marks without the hoptrace tag.
func Snapshot() Dump { return Dump{} }

// Reset does nothing without the hoptrace tag.
func Reset() {}

// Tag is empty without the hoptrace tag: a stream's struct pays nothing
// for it.
type Tag struct{}

// Set does nothing without the hoptrace tag.
func (*Tag) Set(string) {}

// ID returns "" without the hoptrace tag.
func (*Tag) ID() string { return "" }
