package nodeproto

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/openai"
)

var update = flag.Bool("update", false, "rewrite golden files")

const testRequestID = "req_3f9a0c1b2d4e5f60718293a4b5c6d7e8"

func ptr[T any](v T) *T { return &v }

// mustJSON marshals v for a raw payload field.
func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// engineChunk is a content chunk as vLLM streams it.
func engineChunk(t testing.TB) json.RawMessage {
	return mustJSON(t, openai.ChatCompletionChunk{
		ID: "chatcmpl-0123456789abcdef0123456789abcdef", Object: openai.ObjectChatCompletionChunk,
		Created: 1764633600, Model: "meta-llama/Llama-3.1-8B-Instruct",
		Choices: []openai.ChunkChoice{{Delta: openai.Delta{Content: openai.String(" world")}, Logprobs: openai.Null()}},
	})
}

// engineBody is an assign body; its "<", ">" and "&" must cross verbatim.
const engineBody = `{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"user","content":"Is 2 < 3 && 5 > 4?"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":400}`

// goldenFrames returns one frame per golden file, named as the file.
func goldenFrames(t testing.TB) map[string]Frame {
	return map[string]Frame{
		"register": &Register{NodeID: "fra-gpu-07", Token: "nt_5b3f9c2e8a714d06b1e2c3d4f5a6b7c8",
			GPUs: []GPU{{Index: 0, Name: "NVIDIA L40S", MemoryBytes: 48318382080}, {Index: 1, Name: "NVIDIA L40S", MemoryBytes: 48318382080}},
			Models: []Model{{Name: "llama-8b", ServedName: "meta-llama/Llama-3.1-8B-Instruct", MaxNumSeqs: 64,
				MaxModelLen: 8192, KVCapacityTokens: 185000}},
			Version: "0.1.0", Location: LocationOnPrem, Capabilities: []string{CapLoadModel}},
		"register_cloud": &Register{NodeID: "vllm-8b-0", Token: "nt_0a1b2c3d4e5f60718293a4b5c6d7e8f9",
			GPUs: []GPU{{Index: 0, Name: "NVIDIA L40S", MemoryBytes: 48318382080}},
			Models: []Model{{Name: "llama-8b", ServedName: "meta-llama/Llama-3.1-8B-Instruct", MaxNumSeqs: 64,
				MaxModelLen: 8192, KVCapacityTokens: 185000}},
			Version: "0.1.0", Location: LocationCloud, ServiceURL: "http://vllm-8b-0.vllm-8b.inference.svc:8000"},
		"welcome":     &Welcome{Epoch: 42, HeartbeatInterval: 5, Window: DefaultWindow, OrchestratorID: "orch-1", Version: "0.1.0"},
		"retry_after": &RetryAfter{Seconds: 7, Reason: "registration rate limit"},
		"reconnect":   &Reconnect{AfterMS: 4200, Reason: "replica shutting down"},
		"assign":      &Assign{RequestID: testRequestID, Model: "llama-8b", Body: json.RawMessage(engineBody)},
		"cancel":      &Cancel{RequestID: testRequestID, Reason: "client_gone"},
		"load_model":  &LoadModel{Name: "qwen-32b"},
		"drain":       &Drain{DeadlineMS: 120000},
		"window":      &Window{RequestID: testRequestID, Chunks: 16},
		"ack":         &Ack{RequestIDs: []string{testRequestID, "req_00112233445566778899aabbccddeeff"}},
		"chunk":       &Chunk{RequestID: testRequestID, Seq: 7, Delta: engineChunk(t)},
		"done":        &Done{RequestID: testRequestID, PromptTokens: 812, CompletionTokens: 394, FinishReason: openai.FinishStop},
		"heartbeat": &Heartbeat{QueueDepth: 3, KVCacheUsage: ptr(0.62), GPUUtil: ptr(0.91), Running: 28,
			Models: []string{"llama-8b"}},
		// Telemetry unknown: gpu_util is absent, which differs from the idle
		// KV cache's explicit 0.
		"heartbeat_no_telemetry": &Heartbeat{KVCacheUsage: ptr(0.0), Draining: true},
		"error": &Error{RequestID: testRequestID, Status: 400, Message: "context too long",
			Body: openai.NewEngineError(400, "input_tokens", "This model's maximum context length is 8192 tokens.").Marshal()},
		"error_connection": &Error{Status: 401, Message: "node token revoked"},
	}
}

func TestGolden(t *testing.T) {
	for name, frame := range goldenFrames(t) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name+".json")
			got, err := Encode(frame)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Encode differs from %s\ngot:  %s\nwant: %s", path, got, want)
			}
			decoded, err := Decode(want)
			if err != nil {
				t.Fatalf("Decode(golden): %v", err)
			}
			if !reflect.DeepEqual(decoded, frame) {
				t.Errorf("Decode(golden) = %#v, want %#v", decoded, frame)
			}
			again, err := Encode(decoded)
			if err != nil {
				t.Fatalf("Encode(Decode(golden)): %v", err)
			}
			if !bytes.Equal(again, want) {
				t.Errorf("Encode(Decode(golden)) differs\ngot:  %s\nwant: %s", again, want)
			}
		})
	}
}

// TestGoldenCoversEveryType proves each frame type has testdata/<type>.json
// holding a frame of that type, and that no golden file is stale.
func TestGoldenCoversEveryType(t *testing.T) {
	frames := goldenFrames(t)
	for _, typ := range Types() {
		f, ok := frames[string(typ)]
		if !ok {
			t.Errorf("no golden frame for type %q", typ)
			continue
		}
		if got := f.Type(); got != typ {
			t.Errorf("golden %q holds a %q frame", typ, got)
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if _, ok := frames[strings.TrimSuffix(filepath.Base(file), ".json")]; !ok {
			t.Errorf("golden file %s has no frame in goldenFrames", file)
		}
	}
}

// TestGoldenHeader proves every encoded frame starts with "v" then "type",
// the layout the fast decode paths rely on.
func TestGoldenHeader(t *testing.T) {
	for name, frame := range goldenFrames(t) {
		t.Run(name, func(t *testing.T) {
			got, err := Encode(frame)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"v":1,"type":"` + string(frame.Type()) + `"`
			if !strings.HasPrefix(string(got), want) {
				t.Errorf("frame starts %.40q, want prefix %q", got, want)
			}
		})
	}
}
