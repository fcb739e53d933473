//go:build parsecount

package engineclient

import "sync/atomic"

var parses atomic.Int64

func counted() { parses.Add(1) }

// Parses is how many events ParseEvent has read in this process.
func Parses() int64 { return parses.Load() }
