package nodeagent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// maxCompletionLine bounds one line of a completion log when it is read
// back: a line is under 300 bytes, so a longer one is not ours.
const maxCompletionLine = 64 << 10

// ErrCompletionLog means a completion log holds a line that is not a
// completion (a torn last line from a crash is not one: it is skipped).
var ErrCompletionLog = errors.New("nodeagent: corrupt completion log")

// Completion is one line of the completion log: a finished request's
// counts as the agent reported them in its done frame. Prompts and bodies
// are never written.
type Completion struct {
	RequestID        string `json:"request_id"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	// FinishReason is the engine's, "abort" after a cancel or a dropped
	// link, and empty when the engine stream broke.
	FinishReason string    `json:"finish_reason"`
	FinishedAt   time.Time `json:"finished_at"`
}

// completionLog appends completions to a file, one JSON line each. A nil
// *completionLog writes nothing.
type completionLog struct {
	mu    sync.Mutex
	f     *os.File
	clock clock.PassiveClock // stamps FinishedAt
	buf   []byte
}

// openCompletionLog opens path for appending, creating it readable by the
// agent's user only; an empty path means no log. clk stamps the lines.
func openCompletionLog(path string, clk clock.PassiveClock) (*completionLog, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open completion log: %w", err)
	}
	return &completionLog{f: f, clock: clk}, nil
}

// write appends d's counts as one line in one write, so concurrent agents
// or a crash leave at most a torn last line.
func (l *completionLog) write(d *nodeproto.Done) error {
	if l == nil {
		return nil
	}
	b, err := json.Marshal(Completion{RequestID: d.RequestID, PromptTokens: d.PromptTokens,
		CompletionTokens: d.CompletionTokens, FinishReason: d.FinishReason, FinishedAt: l.clock.Now().UTC()})
	if err != nil {
		return fmt.Errorf("encode completion: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(append(l.buf[:0], b...), '\n')
	if _, err := l.f.Write(l.buf); err != nil {
		return fmt.Errorf("append completion: %w", err)
	}
	return nil
}

// close closes the file.
func (l *completionLog) close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// ReadCompletionLog reads a completion log into a map by request id; of
// two lines for one request the later wins. A torn last line (no newline,
// not JSON) is skipped; any other line that is not a completion is an
// error wrapping ErrCompletionLog.
func ReadCompletionLog(path string) (map[string]Completion, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open completion log: %w", err)
	}
	defer f.Close()
	out := make(map[string]Completion)
	r := bufio.NewReaderSize(f, 4096)
	for n := 1; ; n++ {
		line, err := readLine(r)
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return out, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read completion log line %d: %w", n, err)
		}
		torn := errors.Is(err, io.EOF) // the last line has no newline
		var c Completion
		if jerr := json.Unmarshal(line, &c); jerr != nil || !nodeproto.ValidID(c.RequestID) {
			if torn {
				return out, nil
			}
			return nil, fmt.Errorf("%w: %s line %d", ErrCompletionLog, path, n)
		}
		out[c.RequestID] = c
		if torn {
			return out, nil
		}
	}
}

// readLine returns the next line without its newline; io.EOF with a
// non-empty line means the file ended without one.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxCompletionLine {
			return nil, fmt.Errorf("%w: line over %d bytes", ErrCompletionLog, maxCompletionLine)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}
