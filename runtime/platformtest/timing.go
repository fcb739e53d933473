package platformtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/hoptrace"
)

// FirstTokenTimesPath is where a TimedEngine serves what it timed.
const FirstTokenTimesPath = "/debug/first-token-times"

// TimedEngine serves an engine and records, for each loadgen request
// (found by the id at the start of its prompt), the time from the request
// reaching the engine to the engine writing its first content chunk: what
// a path adds to a request's time to first token is the client's time
// less this one.
type TimedEngine struct {
	h   http.Handler
	mu  sync.Mutex
	ttf map[string]time.Duration
}

// NewTimedEngine times the chat completions h serves.
func NewTimedEngine(h http.Handler) *TimedEngine {
	return &TimedEngine{h: h, ttf: map[string]time.Duration{}}
}

var loadgenRequestID = regexp.MustCompile(`req-[a-z]+-[0-9]+`)

func (e *TimedEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	switch r.URL.Path {
	case FirstTokenTimesPath:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(e.Times())
		return
	case "/v1/chat/completions":
	default:
		e.h.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	id := string(loadgenRequestID.Find(body))
	if hoptrace.On {
		hoptrace.MarkAt(id, hoptrace.EngineIn, start)
	}
	e.h.ServeHTTP(&firstTokenWriter{ResponseWriter: w, first: func() {
		if hoptrace.On {
			hoptrace.Mark(id, hoptrace.EngineFirst)
		}
		if id != "" {
			e.mu.Lock()
			e.ttf[id] = time.Since(start)
			e.mu.Unlock()
		}
	}}, r)
}

// Times returns the first-token times recorded so far, by request id.
func (e *TimedEngine) Times() map[string]time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]time.Duration, len(e.ttf))
	for id, d := range e.ttf {
		out[id] = d
	}
	return out
}

// FirstTokenTimes fetches a TimedEngine's times from its base URL.
func FirstTokenTimes(tb testing.TB, engineURL string) map[string]time.Duration {
	tb.Helper()
	resp, err := http.Get(engineURL + FirstTokenTimesPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]time.Duration
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s: %s", FirstTokenTimesPath, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		tb.Fatal(fmt.Errorf("%s: %w", FirstTokenTimesPath, err))
	}
	return out
}

// firstTokenWriter calls first when the first content chunk is written.
type firstTokenWriter struct {
	http.ResponseWriter
	first func()
	seen  bool
}

func (w *firstTokenWriter) Write(p []byte) (int, error) {
	if !w.seen {
		if data, ok := bytes.CutPrefix(p, []byte("data: ")); ok && engineclient.ParseEvent(data).Tokens > 0 {
			w.seen = true
			w.first()
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w *firstTokenWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *firstTokenWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
