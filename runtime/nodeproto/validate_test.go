package nodeproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
)

// TestValidateRefuses lists, per frame type, frames missing a required
// field or holding one out of range. Each must fail Validate with
// ErrInvalid, and Encode must refuse it and leave dst unchanged.
func TestValidateRefuses(t *testing.T) {
	model := Model{Name: "llama-8b", ServedName: "m", MaxNumSeqs: 1, MaxModelLen: 1, KVCapacityTokens: 1}
	reg := func(mod func(*Register)) *Register {
		r := &Register{NodeID: "n1", Token: "nt_x", Version: "0.1.0", Location: LocationOnPrem,
			GPUs: []GPU{{Index: 0, Name: "L40S", MemoryBytes: 1}}, Models: []Model{model}}
		mod(r)
		return r
	}
	tests := []struct {
		name  string
		frame Frame
	}{
		{"register nil", (*Register)(nil)},
		{"register no node id", reg(func(r *Register) { r.NodeID = "" })},
		{"register node id with slash", reg(func(r *Register) { r.NodeID = "a/b" })},
		{"register node id too long", reg(func(r *Register) { r.NodeID = strings.Repeat("n", MaxIDLen+1) })},
		{"register no token", reg(func(r *Register) { r.Token = "" })},
		{"register no version", reg(func(r *Register) { r.Version = "" })},
		{"register no location", reg(func(r *Register) { r.Location = "" })},
		{"register unknown location", reg(func(r *Register) { r.Location = "moon" })},
		{"register onprem with service url", reg(func(r *Register) { r.ServiceURL = "http://10.0.0.1:8000" })},
		{"register cloud without service url", reg(func(r *Register) { r.Location = LocationCloud })},
		{"register cloud with bad service url", reg(func(r *Register) { r.Location, r.ServiceURL = LocationCloud, "ftp://x" })},
		{"register gpu without name", reg(func(r *Register) { r.GPUs[0].Name = "" })},
		{"register gpu without memory", reg(func(r *Register) { r.GPUs[0].MemoryBytes = 0 })},
		{"register duplicate gpu index", reg(func(r *Register) { r.GPUs = append(r.GPUs, r.GPUs[0]) })},
		{"register model without name", reg(func(r *Register) { r.Models[0].Name = "" })},
		{"register duplicate model", reg(func(r *Register) { r.Models = append(r.Models, model) })},
		{"register model without served name", reg(func(r *Register) { r.Models[0].ServedName = "" })},
		{"register model without kv capacity", reg(func(r *Register) { r.Models[0].KVCapacityTokens = 0 })},
		{"register empty capability", reg(func(r *Register) { r.Capabilities = []string{""} })},
		{"welcome nil", (*Welcome)(nil)},
		{"welcome no epoch", &Welcome{HeartbeatInterval: 5, Window: 32, OrchestratorID: "o"}},
		{"welcome no interval", &Welcome{Epoch: 1, Window: 32, OrchestratorID: "o"}},
		{"welcome no window", &Welcome{Epoch: 1, HeartbeatInterval: 5, OrchestratorID: "o"}},
		{"welcome no orchestrator", &Welcome{Epoch: 1, HeartbeatInterval: 5, Window: 32}},
		{"retry_after zero", &RetryAfter{}},
		{"reconnect negative", &Reconnect{AfterMS: -1}},
		{"assign no request id", &Assign{Model: "m", Body: json.RawMessage(`{}`)}},
		{"assign no model", &Assign{RequestID: "r", Body: json.RawMessage(`{}`)}},
		{"assign no body", &Assign{RequestID: "r", Model: "m"}},
		{"assign body not object", &Assign{RequestID: "r", Model: "m", Body: json.RawMessage(`"hi"`)}},
		{"assign body broken", &Assign{RequestID: "r", Model: "m", Body: json.RawMessage(`{"a":`)}},
		{"cancel no request id", &Cancel{}},
		{"load_model no name", &LoadModel{}},
		{"drain negative deadline", &Drain{DeadlineMS: -1}},
		{"window no request id", &Window{Chunks: 1}},
		{"window zero chunks", &Window{RequestID: "r", Chunks: 0}},
		{"ack empty", &Ack{}},
		{"ack bad id", &Ack{RequestIDs: []string{"r", ""}}},
		{"chunk no request id", &Chunk{Delta: json.RawMessage(`{}`)}},
		{"chunk negative seq", &Chunk{RequestID: "r", Seq: -1, Delta: json.RawMessage(`{}`)}},
		{"chunk no delta", &Chunk{RequestID: "r"}},
		{"chunk delta whitespace only", &Chunk{RequestID: "r", Delta: json.RawMessage(" \n")}},
		{"done no request id", &Done{}},
		{"done negative tokens", &Done{RequestID: "r", CompletionTokens: -1}},
		{"heartbeat negative queue", &Heartbeat{QueueDepth: -1}},
		{"heartbeat negative running", &Heartbeat{Running: -1}},
		{"heartbeat kv negative", &Heartbeat{KVCacheUsage: ptr(-0.1)}},
		{"heartbeat gpu over 1", &Heartbeat{GPUUtil: ptr(1.01)}},
		{"heartbeat gpu NaN", &Heartbeat{GPUUtil: ptr(math.NaN())}},
		{"heartbeat empty model", &Heartbeat{Models: []string{""}}},
		{"error status 200", &Error{Status: 200, Message: "x"}},
		{"error status 600", &Error{Status: 600, Message: "x"}},
		{"error no message", &Error{Status: 500}},
		{"error bad request id", &Error{RequestID: "r 1", Status: 500, Message: "x"}},
		{"error body not object", &Error{Status: 500, Message: "x", Body: json.RawMessage(`[]`)}},
		{"error negative retry", &Error{Status: 429, Message: "x", RetryAfter: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.frame.Validate(); !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate = %v, want ErrInvalid", err)
			}
			dst := []byte("prefix")
			got, err := AppendFrame(dst, tt.frame)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("AppendFrame error = %v, want ErrInvalid", err)
			}
			if string(got) != "prefix" {
				t.Errorf("AppendFrame changed dst to %q", got)
			}
		})
	}
}

// TestValidateAcceptsOptionalFieldsAbsent proves the optional fields are
// optional: these minimal frames are valid and round-trip.
func TestValidateAcceptsOptionalFieldsAbsent(t *testing.T) {
	tests := []struct {
		name  string
		frame Frame
		want  string
	}{
		{"register without gpus or models", &Register{NodeID: "n1", Token: "t", Version: "1", Location: LocationOnPrem},
			`{"v":1,"type":"register","node_id":"n1","token":"t","version":"1","location":"onprem"}`},
		{"drain without deadline", &Drain{}, `{"v":1,"type":"drain"}`},
		{"heartbeat idle, telemetry unknown", &Heartbeat{}, `{"v":1,"type":"heartbeat","queue_depth":0,"running":0,"draining":false}`},
		{"heartbeat gpu idle", &Heartbeat{GPUUtil: ptr(0.0)}, `{"v":1,"type":"heartbeat","queue_depth":0,"gpu_util":0,"running":0,"draining":false}`},
		{"done without finish reason", &Done{RequestID: "r"}, `{"v":1,"type":"done","request_id":"r","prompt_tokens":0,"completion_tokens":0}`},
		{"reconnect now", &Reconnect{}, `{"v":1,"type":"reconnect","after_ms":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encode(tt.frame)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Encode = %s, want %s", got, tt.want)
			}
			if _, err := Decode(got); err != nil {
				t.Errorf("Decode: %v", err)
			}
		})
	}
}

// TestHeartbeatUnknownDiffersFromZero proves absent telemetry decodes to
// nil and an explicit 0 to a pointer to 0.
func TestHeartbeatUnknownDiffersFromZero(t *testing.T) {
	f, err := Decode(readGolden(t, "heartbeat_no_telemetry"))
	if err != nil {
		t.Fatal(err)
	}
	hb := f.(*Heartbeat)
	if hb.GPUUtil != nil {
		t.Errorf("GPUUtil = %v, want nil (unknown)", *hb.GPUUtil)
	}
	if hb.KVCacheUsage == nil || *hb.KVCacheUsage != 0 {
		t.Errorf("KVCacheUsage = %v, want pointer to 0", hb.KVCacheUsage)
	}
}

func TestEncodeRefuses(t *testing.T) {
	tests := []struct {
		name  string
		frame Frame
		want  error
	}{
		{"nil frame", nil, ErrInvalid},
		{"chunk over the server's read limit", &Chunk{RequestID: "r",
			Delta: json.RawMessage(`{"x":"` + strings.Repeat("a", ServerReadLimit) + `"}`)}, ErrTooLarge},
		{"assign over the agent's read limit", &Assign{RequestID: "r", Model: "m",
			Body: json.RawMessage(`{"x":"` + strings.Repeat("a", AgentReadLimit) + `"}`)}, ErrTooLarge},
		{"error over the server's read limit", &Error{Status: 500,
			Message: strings.Repeat("m", ServerReadLimit)}, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("prefix")
			got, err := AppendFrame(dst, tt.frame)
			if !errors.Is(err, tt.want) {
				t.Errorf("AppendFrame error = %v, want %v", err, tt.want)
			}
			if string(got) != "prefix" {
				t.Errorf("AppendFrame left %d bytes in dst, want it unchanged", len(got))
			}
		})
	}
}

// TestEncodeLargestLegalFrames proves the read limits leave room for the
// largest payloads the platform allows: an SSE event of the SSE reader's
// maximum in a chunk, a gateway-sized body in an assign.
func TestEncodeLargestLegalFrames(t *testing.T) {
	const maxEvent = 1 << 20 // openai.MaxEventBytes
	const maxBody = 8 << 20  // gateway.MaxBodyBytes
	tests := []struct {
		name  string
		frame Frame
	}{
		{"chunk with a 1 MiB event", &Chunk{RequestID: testRequestID, Seq: math.MaxInt64,
			Delta: json.RawMessage(`{"x":"` + strings.Repeat("a", maxEvent-8) + `"}`)}},
		{"assign with an 8 MiB body", &Assign{RequestID: testRequestID, Model: strings.Repeat("m", 256),
			Body: json.RawMessage(`{"x":"` + strings.Repeat("a", maxBody-8) + `"}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, err := Encode(tt.frame)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := Decode(enc)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got.Type() != tt.frame.Type() {
				t.Errorf("decoded %s, want %s", got.Type(), tt.frame.Type())
			}
		})
	}
}

// TestEncodeWritesRawPayloadsVerbatim proves chunk deltas and assign bodies
// are copied, not re-encoded: HTML-special characters and escapes survive,
// and only surrounding whitespace is dropped.
func TestEncodeWritesRawPayloadsVerbatim(t *testing.T) {
	payload := `{"content":"a<b>&c \u00e9 \u2028","n":1.50}`
	tests := []struct {
		name  string
		frame Frame
		want  string
	}{
		{"chunk", &Chunk{RequestID: "r", Seq: 1, Delta: json.RawMessage(" " + payload + "\n")},
			`{"v":1,"type":"chunk","request_id":"r","seq":1,"delta":` + payload + `}`},
		{"assign", &Assign{RequestID: "r", Model: "m<&>\"é", Body: json.RawMessage(payload)},
			`{"v":1,"type":"assign","request_id":"r","model":"m<&>\"é","body":` + payload + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encode(tt.frame)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Encode = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestTypeDirections(t *testing.T) {
	for _, typ := range Types() {
		t.Run(string(typ), func(t *testing.T) {
			if !typ.FromNode() && !typ.FromServer() {
				t.Errorf("%s has no sender", typ)
			}
			if got, want := typ.FromNode() && typ.FromServer(), typ == TypeError; got != want {
				t.Errorf("sent both ways = %v, want %v", got, want)
			}
			if newFrame(typ) == nil || newFrame(typ).Type() != typ {
				t.Errorf("newFrame(%s) does not build a %s frame", typ, typ)
			}
		})
	}
}

func TestRequestIDOf(t *testing.T) {
	for name, f := range goldenFrames(t) {
		t.Run(name, func(t *testing.T) {
			enc, err := Encode(f)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if bytes.Contains(enc, []byte(`"request_id":"`)) {
				want = testRequestID
			}
			if got := RequestIDOf(f); got != want {
				t.Errorf("RequestIDOf = %q, want %q", got, want)
			}
		})
	}
}

// TestSecretNeverPrinted proves a register frame's token stays out of fmt
// and slog output but is on the wire.
func TestSecretNeverPrinted(t *testing.T) {
	const token = "nt_5b3f9c2e8a714d06b1e2c3d4f5a6b7c8"
	r := goldenFrames(t)["register"].(*Register)
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("register", "token", r.Token, "frame", r)
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", r), "%+v": fmt.Sprintf("%+v", r), "%#v": fmt.Sprintf("%#v", r),
		"%s token": fmt.Sprintf("%s", r.Token), "slog": logged.String(),
	}
	for name, out := range outputs {
		if strings.Contains(out, token) {
			t.Errorf("%s output contains the token: %s", name, out)
		}
	}
	enc, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(enc, []byte(`"token":"`+token+`"`)) {
		t.Errorf("encoded frame lacks the token: %s", enc)
	}
}

// TestDeepPayloadIsStillJSON: a payload nested past jsonscan's depth is
// valid JSON all the same; the check falls back to encoding/json, so such
// a chunk is encoded and decoded like any other, and a malformed one is
// still refused.
func TestDeepPayloadIsStillJSON(t *testing.T) {
	deep := []byte(`{"a":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`)
	if !json.Valid(deep) {
		t.Fatal("the test's payload is not valid JSON")
	}
	b, err := Encode(&Chunk{RequestID: "req_1", Seq: 0, Delta: deep})
	if err != nil {
		t.Fatalf("encode a deep payload: %v", err)
	}
	f, err := Decode(b)
	if err != nil {
		t.Fatalf("decode a deep payload: %v", err)
	}
	if c, ok := f.(*Chunk); !ok || !bytes.Equal(c.Delta, deep) {
		t.Fatalf("decoded %#v, want the chunk with its payload", f)
	}
	bad := deep[:len(deep)-2]
	if _, err := Encode(&Chunk{RequestID: "req_1", Seq: 0, Delta: append(bad, '}')}); err == nil {
		t.Error("a malformed deep payload was encoded")
	}
}
