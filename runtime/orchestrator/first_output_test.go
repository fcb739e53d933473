package orchestrator

import (
	"testing"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// TestFirstOutputIsTheFirstTokenOnce: the read loop hands its processor to
// a request's consumer once, for the chunk that carries the request's
// first output; the role chunk before it and the chunks after it do not.
func TestFirstOutputIsTheFirstTokenOnce(t *testing.T) {
	chunk := func(seq int64, delta string) *nodeproto.Chunk {
		return &nodeproto.Chunk{RequestID: "r", Seq: seq, Delta: []byte(delta)}
	}
	role := `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`
	token := `{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`
	tool := `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`
	for _, tc := range []struct {
		name   string
		chunks []*nodeproto.Chunk
		want   []bool
	}{
		{"role then tokens", []*nodeproto.Chunk{chunk(0, role), chunk(1, token), chunk(2, token)}, []bool{false, true, false}},
		{"token first", []*nodeproto.Chunk{chunk(0, token), chunk(1, token)}, []bool{true, false}},
		{"tool call", []*nodeproto.Chunk{chunk(0, role), chunk(1, tool), chunk(2, token)}, []bool{false, true, false}},
		{"late first token", []*nodeproto.Chunk{chunk(0, role), chunk(1, role), chunk(2, role), chunk(3, role), chunk(4, token)},
			[]bool{false, false, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newReqStream("r", "n", 1, 16, nil, func() {})
			for i, c := range tc.chunks {
				ev, early := s.early(c)
				if got := early && s.firstOutput(&ev); got != tc.want[i] {
					t.Errorf("chunk %d: firstOutput = %v, want %v", c.Seq, got, tc.want[i])
				}
			}
		})
	}
}
