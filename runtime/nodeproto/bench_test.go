package nodeproto

import (
	"encoding/json"
	"testing"
)

// The chunk benchmarks measure the hot path: one engine event per frame,
// thousands a second per node. The Envelope benchmark is the obvious
// encoding/json design (an envelope with a json.RawMessage payload, decoded
// twice) for comparison.

func BenchmarkEncodeChunk(b *testing.B) {
	c := goldenFrames(b)["chunk"].(*Chunk)
	b.ReportAllocs()
	for b.Loop() {
		enc, err := Encode(c)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(enc)))
	}
}

// BenchmarkAppendChunk is the writer goroutine's form: one buffer reused.
func BenchmarkAppendChunk(b *testing.B) {
	c := goldenFrames(b)["chunk"].(*Chunk)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = AppendFrame(buf[:0], c)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(buf)))
	}
}

func BenchmarkDecodeChunk(b *testing.B) {
	in := readGolden(b, "chunk")
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeChunkEnvelope(b *testing.B) {
	in := readGolden(b, "chunk")
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		var env struct {
			V    int    `json:"v"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal(in, &env); err != nil {
			b.Fatal(err)
		}
		var c Chunk
		if err := json.Unmarshal(in, &c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeHeartbeat(b *testing.B) {
	h := goldenFrames(b)["heartbeat"]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeHeartbeat(b *testing.B) {
	in := readGolden(b, "heartbeat")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(in); err != nil {
			b.Fatal(err)
		}
	}
}
