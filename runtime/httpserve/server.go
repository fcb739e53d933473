package httpserve

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// Default limits. Each one bounds what a client that sends nothing, or
// sends slowly, can hold: a goroutine, a socket and its buffers.
const (
	// ReadHeaderTimeout bounds the request line and headers: an honest
	// client sends them in one round trip.
	ReadHeaderTimeout = 10 * time.Second
	// BodyReadTimeout bounds reading one request's body: the largest body
	// (8 MiB of chat) takes about 60 s at a slow 1.2 Mbit/s link.
	BodyReadTimeout = 60 * time.Second
	// IdleTimeout closes a keep-alive connection with no request for this
	// long: a client that comes back later opens a new one in one round
	// trip, and the idle connection no longer holds a goroutine.
	IdleTimeout = 60 * time.Second
)

// Limits are a server's connection limits; zero fields take the defaults.
type Limits struct {
	ReadHeaderTimeout time.Duration
	BodyReadTimeout   time.Duration
	IdleTimeout       time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = ReadHeaderTimeout
	}
	if l.BodyReadTimeout <= 0 {
		l.BodyReadTimeout = BodyReadTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = IdleTimeout
	}
	return l
}

// New returns a server for h with the default limits.
func New(h http.Handler) *http.Server { return Limits{}.New(h) }

// New returns a server for h with limits l.
func (l Limits) New(h http.Handler) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           BodyDeadline(h, l.BodyReadTimeout),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
	}
}

// BodyDeadline gives each request with a body d to deliver it. The
// deadline is on the connection's (or HTTP/2 stream's) reads and is lifted
// once the body has been read to its end, so a response that streams for
// minutes afterwards is not cut (net/http lifts it itself on HTTP/1 when
// it starts watching for the client to go; the lift here covers HTTP/2);
// net/http sets the next request's read deadlines afresh.
func BodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			h.ServeHTTP(w, r) // a transport without read deadlines
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the connection's read deadline when the body ends.
type deadlineBody struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}
