package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/openai"
)

// Bounds of the bodies a gateway reads and decodes at once, each with its
// reason.
const (
	// DefaultBodyBudget is the memory a gateway process lets request
	// bodies take while they are read, decoded, checked and reserved for,
	// counted as bodyWeight bytes per byte of body (the body itself and
	// its decode), the decoded messages' size, and slowBodyWeight per byte
	// for a body the exact decode takes (TestDecodeMemoryIsBounded holds
	// the decode to those figures). 128 MiB lets four 8 MiB bodies decode
	// at once beside thousands of ordinary ones, and keeps a gateway far
	// below its container's memory limit (2 GiB in the reference
	// Deployment) whatever arrives.
	DefaultBodyBudget = 128 << 20
	// DefaultBodyWait is how long a body waits for room in the budget
	// before its request is answered 503 with Retry-After: long enough
	// for a burst of large bodies to take turns (an 8 MiB body decodes in
	// tens of milliseconds), short enough that a client under overload
	// hears so at once.
	DefaultBodyWait = 2 * time.Second
	// bodyWeight is what a byte of body costs the budget: the byte, and
	// at most two more for its decode besides the messages.
	bodyWeight = 3
	// smallBodyBytes is the size up to which a body is small: the bodies
	// of ordinary requests. Large bodies together may take the budget only
	// up to smallReserve below its limit, so small ones always find room:
	// a flood of 8 MiB bodies cannot delay another team's short requests.
	smallBodyBytes = 64 << 10
	// smallReserveDivisor sets the part of the budget only small bodies
	// may take: a quarter, room for hundreds of 64 KiB bodies at once.
	smallReserveDivisor = 4
	// bodyChunk is the first buffer of a body of unknown length (chunked
	// encoding); the buffer doubles as the body arrives, its weight taken
	// before each growth: the budget holds what was read (within a factor
	// of two), not what the client announced.
	bodyChunk = 64 << 10
	// retryBodyBudget is the Retry-After of a request refused for the
	// budget: the bodies before it decode in well under a second.
	retryBodyBudget = time.Second
	// drainTimeout bounds the reading of a body the gateway refuses
	// without decoding it (drainUnread): a client on a 10 Mbit/s link
	// sends 8 MiB within it, and one slower than that is cut. Draining
	// holds a goroutine and a small shared buffer, no memory of its own.
	drainTimeout = 10 * time.Second
)

// errBodyPastLength is a body longer than its Content-Length.
var errBodyPastLength = errors.New("the body is longer than its announced length")

// errBodyBudget is a body that found no room in the budget in time.
var errBodyBudget = errors.New("no room to read the request body in time")

// bodyBudget bounds the memory the bodies being read and decoded take
// together, in one process. It is not first come, first served: a small
// body that fits goes ahead of a large one that waits, and large bodies
// together never take the reserve kept for small ones.
type bodyBudget struct {
	limit int64
	wait  time.Duration
	mu    sync.Mutex
	// used is the weight held, by small and by large bodies.
	used [2]int64
	// freed is closed, and replaced, when weight is given back while a
	// body waits (waiting > 0): the waiters try again. Without waiters a
	// release costs no allocation.
	freed   chan struct{}
	waiting int
	// metrics observes the weight in use; nil in tests that build a
	// budget alone.
	metrics *Metrics
}

// The two classes of body a budget keeps apart.
const (
	small = 0
	large = 1
)

func newBodyBudget(limit int64, wait time.Duration, m *Metrics) *bodyBudget {
	return &bodyBudget{limit: limit, wait: wait, freed: make(chan struct{}), metrics: m}
}

// class is the class of a body of size bytes.
func class(size int64) int {
	if size > smallBodyBytes {
		return large
	}
	return small
}

// fits reports whether weight w of class c fits now. Large bodies share
// the budget less its reserve; one large body larger than that goes
// alone, so that no body the size limit allows is refused for ever. Small
// bodies may take what is left of the whole budget, and always the
// reserve.
func (b *bodyBudget) fits(c int, w int64) bool {
	reserve := b.limit / smallReserveDivisor
	if c == large {
		return b.used[large]+w <= b.limit-reserve || b.used[large] == 0
	}
	return b.used[small]+b.used[large]+w <= b.limit || b.used[small]+w <= reserve
}

// take takes weight w of class c, waiting until ctx ends for room.
func (b *bodyBudget) take(ctx context.Context, c int, w int64) error {
	for {
		b.mu.Lock()
		if b.fits(c, w) {
			b.used[c] += w
			b.mu.Unlock()
			b.observe(w)
			return nil
		}
		freed := b.freed
		b.waiting++
		b.mu.Unlock()
		var err error
		select {
		case <-freed:
		case <-ctx.Done():
			err = errBodyBudget
		}
		b.mu.Lock()
		b.waiting--
		b.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// give gives back weight w of class c.
func (b *bodyBudget) give(c int, w int64) {
	if w == 0 {
		return
	}
	b.mu.Lock()
	b.used[c] -= w
	if b.waiting > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
	b.mu.Unlock()
	b.observe(-w)
}

// inUse returns the weight held, by small and by large bodies.
func (b *bodyBudget) inUse() [2]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (b *bodyBudget) observe(delta int64) {
	if b.metrics != nil {
		b.metrics.bodyBudget(delta)
	}
}

// heldBody is the weight one request's body holds in the budget, from the
// start of its reading until its request no longer needs the body decoded
// (release, once; then it holds nothing).
type heldBody struct {
	b      *bodyBudget
	weight [2]int64
}

// grow takes w more for a body of size bytes, within ctx.
func (h *heldBody) grow(ctx context.Context, size, w int64) error {
	c := class(size)
	if err := h.b.take(ctx, c, w); err != nil {
		return err
	}
	h.weight[c] += w
	return nil
}

// total is the weight the body holds.
func (h *heldBody) total() int64 {
	if h == nil {
		return 0
	}
	return h.weight[0] + h.weight[1]
}

// release gives the body's weight back; later calls do nothing.
func (h *heldBody) release() {
	if h == nil {
		return
	}
	for c, w := range h.weight {
		h.b.give(c, w)
	}
	h.weight = [2]int64{}
}

// readBody reads the request's body under the budget: its weight is taken
// before the bytes are read — all of it when the client announced the
// length, as its buffer doubles from bodyChunk otherwise — and a body that
// finds no room within the budget's wait is refused (errBodyBudget). The
// body is read into a buffer of its exact length when that is known.
func (b *bodyBudget) readBody(c *gin.Context) ([]byte, *heldBody, error) {
	r := c.Request
	h := &heldBody{b: b}
	ctx, cancel := context.WithTimeout(r.Context(), b.wait)
	defer cancel()
	body := http.MaxBytesReader(c.Writer, r.Body, MaxBodyBytes)
	if n := r.ContentLength; n >= 0 {
		if n > MaxBodyBytes {
			return nil, h, &http.MaxBytesError{Limit: MaxBodyBytes}
		}
		if err := h.grow(ctx, n, bodyWeight*n); err != nil {
			return nil, h, err
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(body, buf); err != nil {
			return nil, h, err
		}
		// The body's end is read too: it is what lifts the body's read
		// deadline (httpserve.BodyDeadline) and starts the server's watch
		// for the client going away; a byte past the announced length is
		// a broken request.
		var past [1]byte
		if m, err := body.Read(past[:]); m > 0 || !errors.Is(err, io.EOF) {
			return nil, h, errors.Join(errBodyPastLength, err)
		}
		return buf, h, nil
	}
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			// Doubled, from bodyChunk up to one byte past the limit (which
			// MaxBytesReader then refuses): the copies left behind add up
			// to the final size, not to its square over bodyChunk.
			grown := min(max(2*int64(cap(buf)), bodyChunk), MaxBodyBytes+1)
			if err := h.grow(ctx, grown, bodyWeight*(grown-int64(cap(buf)))); err != nil {
				return nil, h, err
			}
			buf = append(make([]byte, 0, grown), buf...)
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, h, nil
		}
		if err != nil {
			return nil, h, err
		}
	}
}

// bodyDecoder decodes and validates an endpoint's body into the chat
// completion it runs, asking grow for the memory it allocates beyond
// twice the body (decodeBody); a refusal is the 400's body.
type bodyDecoder func(body []byte, grow func(bytes int64) error) (*openai.ChatCompletionRequest, *openai.ErrorBody, error)

// readRequest reads, decodes (decode; nil is the chat body's decodeBody)
// and validates the body under the budget, answering 400/413/503 itself.
// On success the body's weight stays held until the caller releases it;
// on a refusal it is given back.
func (s *Server) readRequest(c *gin.Context, decode bodyDecoder) (*openai.ChatCompletionRequest, []byte, *heldBody, bool) {
	if decode == nil {
		decode = decodeBody
	}
	body, held, err := s.bodies.readBody(c)
	if err != nil {
		held.release()
		var tooBig *http.MaxBytesError
		switch {
		case errors.Is(err, errBodyBudget):
			drainUnread(c)
			s.write(c, busyReading())
		case errors.As(err, &tooBig):
			writeError(c, http.StatusRequestEntityTooLarge, openai.NewError(openai.TypeInvalidRequest, "request_too_large", "",
				"request body exceeds "+strconv.Itoa(MaxBodyBytes)+" bytes"))
		default:
			writeError(c, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_body", "", "could not read the request body"))
		}
		return nil, nil, nil, false
	}
	size := int64(len(body))
	req, e, err := decode(body, func(w int64) error {
		ctx, cancel := context.WithTimeout(c.Request.Context(), s.bodies.wait)
		defer cancel()
		return held.grow(ctx, size, w)
	})
	if err != nil {
		held.release()
		s.write(c, busyReading())
		return nil, nil, nil, false
	}
	if e != nil {
		held.release()
		writeError(c, http.StatusBadRequest, e)
		return nil, nil, nil, false
	}
	return req, body, held, true
}

// busyReading is the 503 of a body that found no room in the budget.
func busyReading() *rejection {
	return reject(http.StatusServiceUnavailable, "body_budget", openai.TypeUnavailable, "server_busy", "",
		"the gateway is reading as many large request bodies as it can hold; retry shortly").after(retryBodyBudget)
}

// drainUnread reads and drops the body of a request refused before its
// body was read (a key over its limits, a full body budget), so that a
// client still sending it reads the answer and not a reset connection.
// Nothing of it is kept: the bytes pass through a small shared buffer. A
// body that does not arrive within drainTimeout, or that announces more
// than MaxBodyBytes, is not waited for: the connection closes after the
// answer.
func drainUnread(c *gin.Context) {
	r := c.Request
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	if r.ContentLength > MaxBodyBytes {
		c.Header("Connection", "close")
		return
	}
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(drainTimeout))
	n, err := io.Copy(io.Discard, io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil || n > MaxBodyBytes {
		c.Header("Connection", "close")
	}
}
