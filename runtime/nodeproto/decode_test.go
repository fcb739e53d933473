package nodeproto

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chunkWith returns a canonical chunk frame with the given seq and delta.
func chunkWith(seq, delta string) []byte {
	return []byte(`{"v":1,"type":"chunk","request_id":"req_1","seq":` + seq + `,"delta":` + delta + `}`)
}

// decodeErrorCases are inputs Decode must refuse, with the error class and
// the close code it calls for (0 when the connection stays open). FuzzDecode
// seeds from them.
func decodeErrorCases(t testing.TB) []struct {
	name  string
	in    []byte
	want  error
	close CloseCode
} {
	chunk := readGolden(t, "chunk")
	hugeDelta := `{"x":"` + strings.Repeat("a", ServerReadLimit) + `"}`
	return []struct {
		name  string
		in    []byte
		want  error
		close CloseCode
	}{
		{"empty", []byte{}, ErrMalformed, CloseProtocolError},
		{"not JSON", []byte("hello"), ErrMalformed, CloseProtocolError},
		{"array", []byte(`[1,2]`), ErrMalformed, CloseProtocolError},
		{"null", []byte(`null`), ErrMalformed, CloseProtocolError},
		{"no version", []byte(`{"type":"cancel","request_id":"req_1"}`), ErrMalformed, CloseProtocolError},
		{"version as string", []byte(`{"v":"1","type":"cancel","request_id":"req_1"}`), ErrMalformed, CloseProtocolError},
		{"version fraction", []byte(`{"v":1.5,"type":"cancel","request_id":"req_1"}`), ErrMalformed, CloseProtocolError},
		{"no type", []byte(`{"v":1,"request_id":"req_1"}`), ErrMalformed, CloseProtocolError},
		{"type as number", []byte(`{"v":1,"type":7}`), ErrMalformed, CloseProtocolError},
		{"empty type", []byte(`{"v":1,"type":""}`), ErrMalformed, CloseProtocolError},
		{"newer major version", []byte(`{"v":2,"type":"cancel","request_id":"req_1"}`), ErrVersion, CloseProtocolError},
		{"newer major version, unknown type", []byte(`{"v":2,"type":"teleport"}`), ErrVersion, CloseProtocolError},
		{"version zero", []byte(`{"v":0,"type":"cancel","request_id":"req_1"}`), ErrVersion, CloseProtocolError},
		{"unknown type", []byte(`{"v":1,"type":"teleport","to":"mars"}`), ErrUnknownType, 0},
		{"unknown type, other member order", []byte(`{"type":"teleport","v":1}`), ErrUnknownType, 0},
		{"unknown type, broken JSON", []byte(`{"v":1,"type":"teleport",`), ErrMalformed, CloseProtocolError},
		{"truncated chunk", chunk[:len(chunk)-1], ErrMalformed, CloseProtocolError},
		{"trailing garbage", append(bytes.Clone(chunk), 'x'), ErrMalformed, CloseProtocolError},
		{"two frames in one message", append(bytes.Clone(chunk), chunk...), ErrMalformed, CloseProtocolError},
		{"chunk delta not JSON", chunkWith("1", `{nope}`), ErrMalformed, CloseProtocolError},
		{"chunk delta not an object", chunkWith("1", `[1]`), ErrInvalid, CloseProtocolError},
		{"chunk delta is [DONE]", chunkWith("1", `"[DONE]"`), ErrInvalid, CloseProtocolError},
		{"chunk delta missing", []byte(`{"v":1,"type":"chunk","request_id":"req_1","seq":1}`), ErrInvalid, CloseProtocolError},
		{"chunk seq leading zero", chunkWith("07", `{}`), ErrMalformed, CloseProtocolError},
		{"chunk seq negative", chunkWith("-1", `{}`), ErrInvalid, CloseProtocolError},
		{"chunk seq as string", chunkWith(`"7"`, `{}`), ErrMalformed, CloseProtocolError},
		{"chunk seq overflows", chunkWith("99999999999999999999", `{}`), ErrMalformed, CloseProtocolError},
		{"chunk without request id", []byte(`{"v":1,"type":"chunk","seq":1,"delta":{}}`), ErrInvalid, CloseProtocolError},
		{"chunk request id with space", []byte(`{"v":1,"type":"chunk","request_id":"req 1","seq":1,"delta":{}}`), ErrInvalid, CloseProtocolError},
		{"heartbeat count as string", []byte(`{"v":1,"type":"heartbeat","queue_depth":"3","running":1,"draining":false}`), ErrMalformed, CloseProtocolError},
		{"heartbeat kv over 1", []byte(`{"v":1,"type":"heartbeat","queue_depth":3,"kv_cache_usage":1.5,"running":1,"draining":false}`), ErrInvalid, CloseProtocolError},
		{"register without token", []byte(`{"v":1,"type":"register","node_id":"n1","version":"0.1.0","location":"onprem"}`), ErrInvalid, CloseProtocolError},
		{"error body null", []byte(`{"v":1,"type":"error","status":500,"message":"x","body":null}`), ErrInvalid, CloseProtocolError},
		{"over MaxFrameBytes", make([]byte, MaxFrameBytes+1), ErrTooLarge, CloseTooLarge},
		{"chunk over the server's read limit", chunkWith("1", hugeDelta), ErrTooLarge, CloseTooLarge},
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tt := range decodeErrorCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode error = %v, want %v", err, tt.want)
			}
			if f != nil {
				t.Errorf("Decode returned frame %#v with error", f)
			}
			code, closes := CloseCodeOf(err)
			if got, want := closes, tt.close != 0; got != want {
				t.Errorf("CloseCodeOf closes = %v, want %v", got, want)
			}
			if code != tt.close {
				t.Errorf("CloseCodeOf = %d, want %d", code, tt.close)
			}
		})
	}
}

func TestDecodeVersionErrorNamesVersions(t *testing.T) {
	_, err := Decode([]byte(`{"v":2,"type":"welcome"}`))
	var ve *VersionError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a *VersionError", err)
	}
	if ve.Got != 2 {
		t.Errorf("Got = %d, want 2", ve.Got)
	}
	if got, want := ve.Error(), "unsupported protocol version 2; speaks 1"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestDecodeAcceptsAnyLayout proves frames from another encoder (member
// order, whitespace, escapes, unknown members) decode to the same value as
// the canonical encoding, for the fast chunk path and the generic path.
func TestDecodeAcceptsAnyLayout(t *testing.T) {
	tests := []struct {
		name      string
		canonical string
		other     string
	}{
		{"chunk, members reordered",
			`{"v":1,"type":"chunk","request_id":"req_1","seq":3,"delta":{"a":1}}`,
			`{"delta":{"a":1},"seq":3,"request_id":"req_1","type":"chunk","v":1}`},
		{"chunk, whitespace",
			`{"v":1,"type":"chunk","request_id":"req_1","seq":3,"delta":{"a":1}}`,
			" {\n \"v\": 1, \"type\": \"chunk\", \"request_id\": \"req_1\", \"seq\": 3, \"delta\": {\"a\":1} }\n"},
		{"chunk, escaped request id",
			`{"v":1,"type":"chunk","request_id":"req_1","seq":3,"delta":{"a":1}}`,
			`{"v":1,"type":"chunk","request_id":"req\u005f1","seq":3,"delta":{"a":1}}`},
		{"chunk, unknown member",
			`{"v":1,"type":"chunk","request_id":"req_1","seq":3,"delta":{"a":1}}`,
			`{"v":1,"type":"chunk","priority":9,"request_id":"req_1","seq":3,"delta":{"a":1}}`},
		{"chunk, space before the closing brace",
			`{"v":1,"type":"chunk","request_id":"req_1","seq":3,"delta":{"a":1}}`,
			`{"v":1,"type":"chunk","request_id":"req_1","seq":3,"delta":{"a":1} }`},
		{"cancel, members reordered",
			`{"v":1,"type":"cancel","request_id":"req_1"}`,
			`{"request_id":"req_1","type":"cancel","v":1}`},
		{"heartbeat, unknown member",
			`{"v":1,"type":"heartbeat","queue_depth":1,"running":2,"draining":false}`,
			`{"v":1,"type":"heartbeat","queue_depth":1,"running":2,"draining":false,"temperature_c":71}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := Decode([]byte(tt.canonical))
			if err != nil {
				t.Fatalf("Decode(canonical): %v", err)
			}
			got, err := Decode([]byte(tt.other))
			if err != nil {
				t.Fatalf("Decode(other): %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Decode(other) = %#v, want %#v", got, want)
			}
			enc, err := Encode(got)
			if err != nil {
				t.Fatal(err)
			}
			if string(enc) != tt.canonical {
				t.Errorf("Encode = %s, want %s", enc, tt.canonical)
			}
		})
	}
}

// TestDecodeChunkFastPathMatchesSlow proves the hand-written chunk reader
// takes the canonical layout and agrees with encoding/json on it.
func TestDecodeChunkFastPathMatchesSlow(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"golden", readGolden(t, "chunk")},
		{"seq zero", chunkWith("0", `{}`)},
		{"largest fast seq", chunkWith("999999999999999999", `{"a":[1,2,{"b":null}]}`)},
		{"usage chunk", chunkWith("12", `{"choices":[],"usage":{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2}}`)},
		{"delta with braces in strings", chunkWith("1", `{"a":"}\"{"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fast, ok := decodeChunkFast(tt.in)
			if !ok {
				t.Fatal("fast path refused a canonical chunk")
			}
			slow, err := decodeSlow(tt.in)
			if err != nil {
				t.Fatalf("decodeSlow: %v", err)
			}
			if !reflect.DeepEqual(Frame(fast), slow) {
				t.Errorf("fast = %#v, slow = %#v", fast, slow)
			}
		})
	}
}
