package provider

import "syscall"

// errConnRefused is the error of a connection refused, as errors.Is finds
// it in a dial's error: WSAECONNREFUSED, which package syscall does not
// name.
var errConnRefused error = syscall.Errno(10061)
