package nodeagent

import (
	"errors"
	"io/fs"
	clocktesting "k8s.io/utils/clock/testing"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
)

// TestCompletionLogRecordsEveryDone runs a finished and a cancelled
// request and reads the log back: one line each, the done frames' counts,
// no prompt.
func TestCompletionLogRecordsEveryDone(t *testing.T) {
	_, eng := newSim(t)
	srv := newFakeServer(t, fakeOpts{})
	path := filepath.Join(t.TempDir(), "completions.jsonl")
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ag := startAgent(t, srv, eng, func(c *Config) {
		c.CompletionLog = path
		c.Clock = clocktesting.NewFakeClock(at)
	})
	sc := srv.accept(t)
	sc.send(t, assignFrame("req-ok", testModel, eng.served, 12))
	sc.send(t, assignFrame("req-cut", testModel, eng.served, 3000))
	want := map[string]Completion{}
	cancelled := false
	for len(want) < 2 {
		switch f := sc.next(t).(type) {
		case *nodeproto.Chunk:
			if f.RequestID == "req-cut" && !cancelled {
				sc.send(t, &nodeproto.Cancel{RequestID: "req-cut"})
				cancelled = true
			}
		case *nodeproto.Done:
			want[f.RequestID] = Completion{RequestID: f.RequestID, PromptTokens: f.PromptTokens,
				CompletionTokens: f.CompletionTokens, FinishReason: f.FinishReason, FinishedAt: at}
		default:
			t.Fatalf("unexpected %s frame", f.Type())
		}
	}
	ag.stop()
	if err := waitRun(ag.res); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCompletionLog(path)
	if err != nil {
		t.Fatalf("ReadCompletionLog: %v", err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("completion log = %+v, want %+v", got, want)
	}
	if got["req-ok"].FinishReason != openai.FinishLength || got["req-cut"].FinishReason != openai.FinishAbort {
		t.Errorf("finish reasons = %q, %q, want %q, %q", got["req-ok"].FinishReason, got["req-cut"].FinishReason,
			openai.FinishLength, openai.FinishAbort)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "ships") || strings.Count(string(raw), "\n") != 2 {
		t.Errorf("completion log holds a prompt or not one line a request:\n%s", raw)
	}
}

func TestReadCompletionLog(t *testing.T) {
	const (
		a1 = `{"request_id":"a","prompt_tokens":10,"completion_tokens":1,"finish_reason":"abort","finished_at":"2026-03-01T12:00:00Z"}`
		a2 = `{"request_id":"a","prompt_tokens":10,"completion_tokens":5,"finish_reason":"stop","finished_at":"2026-03-01T12:00:01Z"}`
		b  = `{"request_id":"b","prompt_tokens":3,"completion_tokens":0,"finish_reason":"","finished_at":"2026-03-01T12:00:02Z"}`
	)
	tests := []struct {
		name     string
		content  string
		want     map[string]int64 // completion tokens by request
		wantErr  error
		noSuchAt bool
	}{
		{"empty", "", map[string]int64{}, nil, false},
		{"later line wins", a1 + "\n" + b + "\n" + a2 + "\n", map[string]int64{"a": 5, "b": 0}, nil, false},
		{"torn last line skipped", a2 + "\n" + b[:40], map[string]int64{"a": 5}, nil, false},
		{"whole last line without newline", a2 + "\n" + b, map[string]int64{"a": 5, "b": 0}, nil, false},
		{"corrupt line", a2 + "\nnot json\n" + b + "\n", nil, ErrCompletionLog, false},
		{"line without a request id", `{"prompt_tokens":1}` + "\n", nil, ErrCompletionLog, false},
		{"missing file", "", nil, fs.ErrNotExist, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "completions.jsonl")
			if !tt.noSuchAt {
				if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadCompletionLog(path)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ReadCompletionLog error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadCompletionLog: %v", err)
			}
			counts := map[string]int64{}
			for id, c := range got {
				counts[id] = c.CompletionTokens
			}
			if !maps.Equal(counts, tt.want) {
				t.Errorf("completion tokens = %v, want %v", counts, tt.want)
			}
		})
	}
}
