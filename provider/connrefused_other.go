//go:build !windows

package provider

import "syscall"

// errConnRefused is the error of a connection refused, as errors.Is finds
// it in a dial's error.
var errConnRefused error = syscall.ECONNREFUSED
