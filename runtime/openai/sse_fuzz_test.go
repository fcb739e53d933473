package openai

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzSSEReader: whatever bytes an engine sends, the reader never panics,
// never returns an event over MaxEventBytes, ends (no endless loop), and
// the events it returns survive being written back and read again
// unchanged (what the relay forwards is what it read).
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"data: {\"a\":1}\n\ndata: [DONE]\n\n",
		"data: a\ndata: b\n\n: comment\nevent: x\ndata:c\r\n\r\n",
		"data: unterminated",
		"\n\n\ndata:\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewSSEReader(bytes.NewReader(in))
		var events [][]byte
		for range len(in) + 2 { // every event consumes at least one byte
			ev, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrEventTooLarge) {
					t.Fatalf("Next = %v", err)
				}
				break
			}
			if len(ev) > MaxEventBytes {
				t.Fatalf("event of %d bytes, over the limit", len(ev))
			}
			events = append(events, bytes.Clone(ev))
		}
		var out bytes.Buffer
		for _, ev := range events {
			if bytes.ContainsAny(ev, "\r") {
				return // a CR inside a value cannot be written back as one line
			}
			for _, line := range bytes.Split(ev, []byte("\n")) {
				out.WriteString("data: ")
				out.Write(line)
				out.WriteString("\n")
			}
			out.WriteString("\n")
		}
		again := NewSSEReader(&out)
		for i, want := range events {
			got, err := again.Next()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("event %d read back as %q (%v), want %q", i, got, err, want)
			}
		}
	})
}
