package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DoneData is the payload of the event that ends every stream.
var DoneData = []byte("[DONE]")

// MaxEventBytes bounds one server-sent event: a chunk carries a few tokens,
// so 1 MiB is generous and stops a broken peer from growing a buffer forever.
const MaxEventBytes = 1 << 20

// SSEWriter writes server-sent events in the exact framing vLLM uses:
// "data: <payload>\n\n".
type SSEWriter struct {
	w io.Writer
}

// NewSSEWriter returns a writer of events to w.
func NewSSEWriter(w io.Writer) *SSEWriter { return &SSEWriter{w: w} }

// eventBufs holds the buffers events are framed in: shared, so that an
// open stream, which writes now and then, does not keep one of its own.
var eventBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledEvent is the largest buffer eventBufs keeps.
const maxPooledEvent = 64 << 10

// WriteData writes one event whose payload is data.
func (s *SSEWriter) WriteData(data []byte) error {
	bp := eventBufs.Get().(*[]byte)
	buf := append((*bp)[:0], "data: "...)
	buf = append(buf, data...)
	buf = append(buf, '\n', '\n')
	_, err := s.w.Write(buf)
	if cap(buf) <= maxPooledEvent {
		*bp = buf
		eventBufs.Put(bp)
	}
	return err
}

// WriteEvent writes one event named name whose payload is data:
// "event: <name>\ndata: <payload>\n\n", as the Responses API frames its
// events.
func (s *SSEWriter) WriteEvent(name string, data []byte) error {
	bp := eventBufs.Get().(*[]byte)
	buf := append((*bp)[:0], "event: "...)
	buf = append(buf, name...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, '\n', '\n')
	_, err := s.w.Write(buf)
	if cap(buf) <= maxPooledEvent {
		*bp = buf
		eventBufs.Put(bp)
	}
	return err
}

// WriteJSON writes one event whose payload is v encoded as JSON.
func (s *SSEWriter) WriteJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	return s.WriteData(b)
}

// WriteDone writes the final [DONE] event.
func (s *SSEWriter) WriteDone() error { return s.WriteData(DoneData) }

// ErrEventTooLarge is returned when an event exceeds MaxEventBytes.
var ErrEventTooLarge = errors.New("sse: event too large")

// SSEReader reads the data payloads of server-sent events. It accepts
// "data:" with or without a space, CRLF line ends, comments and multi-line
// data, as the SSE specification allows.
type SSEReader struct {
	r    *bufio.Reader
	data []byte
	line []byte
}

// sseBufferSize is the read buffer of an SSEReader. A chunk event is a few
// hundred bytes and a longer line is read in parts, so 4 KiB serves; every
// open stream holds one (the agent's, the gateway's, the client's), so a
// larger buffer costs memory per stream.
const sseBufferSize = 4 << 10

// NewSSEReader returns a reader of events from r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: bufio.NewReaderSize(r, sseBufferSize)}
}

// Next returns the payload of the next event. The slice is valid until the
// next call. At the end of the input it returns io.EOF; an input that ends
// inside an event returns io.ErrUnexpectedEOF.
func (s *SSEReader) Next() ([]byte, error) {
	s.data = s.data[:0]
	have := false
	for {
		line, err := s.readLine()
		if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
			if errors.Is(err, io.EOF) && have {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if have {
				return s.data, nil
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if len(field) == 0 {
			continue // a comment
		}
		if !bytes.Equal(field, []byte("data")) {
			continue // event, id and retry fields carry nothing we use
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if have {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > MaxEventBytes {
			return nil, ErrEventTooLarge
		}
		s.data = append(s.data, value...)
		have = true
	}
}

// IsDone reports whether an event payload is the final [DONE].
func IsDone(data []byte) bool { return bytes.Equal(bytes.TrimSpace(data), DoneData) }

// StreamError returns the error an event carries when it is a mid-stream
// error event ({"error":{…}}), or nil.
func StreamError(data []byte) *Error {
	if !bytes.Contains(data, []byte(`"error"`)) {
		return nil
	}
	var b struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(data, &b) != nil || b.Error == nil {
		return nil
	}
	return b.Error
}

// readLine returns the next line, however long, up to MaxEventBytes.
func (s *SSEReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		part, err := s.r.ReadSlice('\n')
		if len(s.line)+len(part) > MaxEventBytes {
			return nil, ErrEventTooLarge
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			s.line = append(s.line, part...)
			continue
		}
		if len(s.line) == 0 {
			return part, err
		}
		s.line = append(s.line, part...)
		return s.line, err
	}
}
