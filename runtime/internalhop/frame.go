package internalhop

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// EventsType is the media type of the internal hop's answer: the engine's
// events as records of their bytes and what the orchestrator read of them
// (a typed tail), so the gateway relays the bytes and reads none of them.
//
// A record is a tag byte, then for an event ('e') its flags and the
// numbers the flags name as varints, and its bytes after their length:
//
//	'e' flags [usage: prompt completion total] [progress: prompt completion total]
//	    [output: tokens bytes words inner text-tokens calls]
//	    model.from model.to usage.from usage.to member.from member.to
//	    [error: len json] len data
//	'd'                      the engine's [DONE]
//
// A stream that ends without 'd' broke behind the orchestrator.
const EventsType = "application/vnd.llmplat.events"

const (
	tagEvent = 'e'
	tagDone  = 'd'
)

const (
	flagUsage = 1 << iota
	flagProgress
	flagOutput
	flagErr
	flagDuplicate
	flagsAll = 1<<iota - 1
)

// MaxEventBytes bounds one event's bytes on the hop: the engine's reader
// already bounded what it read (the SSE reader's lines), and the gateway
// holds one event per stream at a time.
const MaxEventBytes = 4 << 20

// maxErrBytes bounds an error event's encoded error.
const maxErrBytes = 64 << 10

// appendEvent appends ev's record to b.
func appendEvent(b []byte, ev *dispatch.Event) []byte {
	var flags uint64
	if ev.Usage != nil {
		flags |= flagUsage
	}
	if ev.Progress != nil {
		flags |= flagProgress
	}
	if ev.Tokens != 0 || ev.Calls != 0 || ev.Text != (tokens.Text{}) {
		flags |= flagOutput
	}
	var errJSON []byte
	if ev.Err != nil {
		flags |= flagErr
		errJSON, _ = json.Marshal(ev.Err) // strings and raw JSON the parser checked
	}
	if ev.Duplicate {
		flags |= flagDuplicate
	}
	b = append(b, tagEvent)
	b = binary.AppendUvarint(b, flags)
	if u := ev.Usage; u != nil {
		b = appendInts(b, u.PromptTokens, u.CompletionTokens, u.TotalTokens)
	}
	if u := ev.Progress; u != nil {
		b = appendInts(b, u.PromptTokens, u.CompletionTokens, u.TotalTokens)
	}
	if flags&flagOutput != 0 {
		b = appendInts(b, ev.Tokens, ev.Text.Bytes, ev.Text.Words, ev.Text.Inner, ev.Text.Tokens, ev.Calls)
	}
	m, v, u := ev.ModelValue, ev.UsageValue, ev.UsageMember
	b = appendInts(b, int64(m.From), int64(m.To), int64(v.From), int64(v.To), int64(u.From), int64(u.To))
	if errJSON != nil {
		b = binary.AppendUvarint(b, uint64(len(errJSON)))
		b = append(b, errJSON...)
	}
	b = binary.AppendUvarint(b, uint64(len(ev.Data)))
	return append(b, ev.Data...)
}

func appendInts(b []byte, ns ...int64) []byte {
	for _, n := range ns {
		b = binary.AppendVarint(b, n)
	}
	return b
}

// errMalformed is a record the reader cannot take: the stream breaks.
var errMalformed = errors.New("malformed event record")

// recordReader reads the records of one answer. An event's Data is valid
// until the next read.
type recordReader struct {
	r    *bufio.Reader
	data []byte
}

// next reads the next record into ev; done reports the engine's end.
func (rr *recordReader) next(ev *dispatch.Event) (done bool, err error) {
	tag, err := rr.r.ReadByte()
	if err != nil {
		return false, err
	}
	switch tag {
	case tagDone:
		return true, nil
	case tagEvent:
	default:
		return false, fmt.Errorf("%w: tag %q", errMalformed, tag)
	}
	flags, err := binary.ReadUvarint(rr.r)
	if err != nil {
		return false, unexpected(err)
	}
	if flags&^flagsAll != 0 {
		return false, fmt.Errorf("%w: flags %#x", errMalformed, flags)
	}
	*ev = dispatch.Event{Duplicate: flags&flagDuplicate != 0}
	if flags&flagUsage != 0 {
		if ev.Usage, err = rr.usage(); err != nil {
			return false, err
		}
	}
	if flags&flagProgress != 0 {
		if ev.Progress, err = rr.usage(); err != nil {
			return false, err
		}
	}
	if flags&flagOutput != 0 {
		var n [6]int64
		if err := rr.ints(n[:]); err != nil {
			return false, err
		}
		ev.Tokens, ev.Calls = n[0], n[5]
		ev.Text.Bytes, ev.Text.Words, ev.Text.Inner, ev.Text.Tokens = n[1], n[2], n[3], n[4]
	}
	var s [6]int64
	if err := rr.ints(s[:]); err != nil {
		return false, err
	}
	for _, x := range s {
		if x < 0 || x > MaxEventBytes {
			return false, fmt.Errorf("%w: span %d", errMalformed, x)
		}
	}
	ev.ModelValue = dispatch.Span{From: int(s[0]), To: int(s[1])}
	ev.UsageValue = dispatch.Span{From: int(s[2]), To: int(s[3])}
	ev.UsageMember = dispatch.Span{From: int(s[4]), To: int(s[5])}
	if flags&flagErr != 0 {
		raw, err := rr.bytes(maxErrBytes)
		if err != nil {
			return false, err
		}
		var e openai.Error
		if json.Unmarshal(raw, &e) != nil {
			return false, fmt.Errorf("%w: error", errMalformed)
		}
		ev.Err = &e
	}
	if ev.Data, err = rr.bytes(MaxEventBytes); err != nil {
		return false, err
	}
	if !ev.SpansFit() {
		return false, fmt.Errorf("%w: spans outside the event", errMalformed)
	}
	return false, nil
}

func (rr *recordReader) usage() (*openai.Usage, error) {
	var n [3]int64
	if err := rr.ints(n[:]); err != nil {
		return nil, err
	}
	return &openai.Usage{PromptTokens: n[0], CompletionTokens: n[1], TotalTokens: n[2]}, nil
}

func (rr *recordReader) ints(dst []int64) error {
	for i := range dst {
		n, err := binary.ReadVarint(rr.r)
		if err != nil {
			return unexpected(err)
		}
		dst[i] = n
	}
	return nil
}

// bytes reads a length and that many bytes, at most limit, into the
// reader's buffer.
func (rr *recordReader) bytes(limit int) ([]byte, error) {
	n, err := binary.ReadUvarint(rr.r)
	if err != nil {
		return nil, unexpected(err)
	}
	if n > uint64(limit) || n > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d bytes", errMalformed, n)
	}
	if cap(rr.data) < int(n) {
		rr.data = make([]byte, n)
	}
	rr.data = rr.data[:n]
	if _, err := io.ReadFull(rr.r, rr.data); err != nil {
		return nil, unexpected(err)
	}
	return rr.data, nil
}

// unexpected is an end inside a record.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
