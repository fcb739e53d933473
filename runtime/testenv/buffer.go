package testenv

import (
	"strings"
	"sync"
)

// Buffer is a writer that a process under test (a logger, a command's
// stdout) and the test reading it may share.
type Buffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
