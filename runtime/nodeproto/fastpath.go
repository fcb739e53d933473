package nodeproto

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// The hand-written hot path: chunk frames both ways and assign frames out.
// Both carry raw JSON that must cross the socket verbatim, and chunks cross
// thousands of times a second per node.

var (
	chunkPrefix  = []byte(string(header) + `chunk","request_id":"`)
	assignPrefix = []byte(string(header) + `assign","request_id":"`)
)

const (
	seqKey   = `","seq":`
	deltaKey = `,"delta":`
	modelKey = `","model":`
	bodyKey  = `,"body":`
	// maxSeqDigits keeps the fast parse of seq inside int64; a longer
	// number takes the slow path.
	maxSeqDigits = 18
)

// appendChunk writes a validated chunk. Its request id is a ValidID and
// needs no escaping; its delta is already JSON.
func appendChunk(dst []byte, c *Chunk) []byte {
	delta := trimSpace(c.Delta)
	dst = slices.Grow(dst, len(chunkPrefix)+len(c.RequestID)+len(seqKey)+20+len(deltaKey)+len(delta)+1)
	dst = append(dst, chunkPrefix...)
	dst = append(dst, c.RequestID...)
	dst = append(dst, seqKey...)
	dst = strconv.AppendInt(dst, c.Seq, 10)
	dst = append(dst, deltaKey...)
	dst = append(dst, delta...)
	return append(dst, '}')
}

// appendAssign writes a validated assign, its body verbatim.
func appendAssign(dst []byte, a *Assign) []byte {
	body := trimSpace(a.Body)
	dst = slices.Grow(dst, len(assignPrefix)+len(a.RequestID)+len(modelKey)+len(a.Model)+2+len(bodyKey)+len(body)+1)
	dst = append(dst, assignPrefix...)
	dst = append(dst, a.RequestID...)
	dst = append(dst, modelKey...)
	dst = appendString(dst, a.Model)
	dst = append(dst, bodyKey...)
	dst = append(dst, body...)
	return append(dst, '}')
}

// appendString appends s as a JSON string, as encoding/json writes it
// without HTML escaping.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return appendStringSlow(dst, s)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

func appendStringSlow(dst []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// decodeChunkFast reads a chunk laid out as appendChunk writes it, with one
// validating scan of the delta and no reflection. It reports false for any
// other input, which then takes the slow path; whatever it accepts is a
// valid chunk that the slow path would decode to the same value.
func decodeChunkFast(b []byte) (*Chunk, bool) {
	if !bytes.HasPrefix(b, chunkPrefix) || b[len(b)-1] != '}' {
		return nil, false
	}
	i := len(chunkPrefix)
	start := i
	for i < len(b) && idByte(b[i]) {
		i++
	}
	if i == start || i-start > MaxIDLen || !bytes.HasPrefix(b[i:], []byte(seqKey)) {
		return nil, false
	}
	id := b[start:i]
	i += len(seqKey)
	seq, n := parseSeq(b[i:])
	if n == 0 {
		return nil, false
	}
	i += n
	if !bytes.HasPrefix(b[i:], []byte(deltaKey)) {
		return nil, false
	}
	i += len(deltaKey)
	if i >= len(b) {
		return nil, false
	}
	delta := trimSpace(b[i : len(b)-1])
	if len(delta) == 0 || delta[0] != '{' || !validJSON(delta) {
		return nil, false
	}
	return &Chunk{RequestID: string(id), Seq: seq, Delta: delta[:len(delta):len(delta)]}, true
}

// parseSeq reads a non-negative JSON integer at the start of b and returns
// it with its length, or length 0 when b does not start with one the fast
// path handles.
func parseSeq(b []byte) (int64, int) {
	n := 0
	var v int64
	for n < len(b) && n <= maxSeqDigits && b[n] >= '0' && b[n] <= '9' {
		v = v*10 + int64(b[n]-'0')
		n++
	}
	switch {
	case n == 0, n > maxSeqDigits:
		return 0, 0
	case b[0] == '0' && n > 1:
		return 0, 0 // a leading zero is not JSON
	}
	return v, n
}

// trimSpace drops JSON whitespace around a raw value.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
