// Package wsconn is the node socket's WebSocket: gorilla/websocket behind
// the small, context-aware API the orchestrator and the node agent use.
//
// It keeps an idle socket cheap, since a cluster holds a thousand of them:
// no per-message compression; write buffers from one shared pool, held
// only while a message is written; on the server, the read buffer is the
// HTTP server's own; and no goroutine of its own (deadlines and
// context.AfterFunc do the waiting). Writes are serialized by a mutex, as
// gorilla allows one writer at a time; control frames (ping, close) may be
// sent concurrently with them.
package wsconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// StatusCode is a WebSocket close code (RFC 6455 §7.4).
type StatusCode int

// The close codes the node protocol uses.
const (
	StatusNormalClosure   StatusCode = 1000
	StatusGoingAway       StatusCode = 1001
	StatusProtocolError   StatusCode = 1002
	StatusPolicyViolation StatusCode = 1008
	StatusInternalError   StatusCode = 1011
	StatusTryAgainLater   StatusCode = 1013
)

// controlWait bounds the write of a ping or close frame.
const controlWait = 5 * time.Second

// writePool lends every socket its write buffer for the time of one
// message, so idle sockets hold none.
var writePool sync.Pool

var upgrader = websocket.Upgrader{
	// 0: the read buffer is the HTTP server's, which the upgrade takes over.
	WriteBufferSize:   4096,
	WriteBufferPool:   &writePool,
	EnableCompression: false,
	HandshakeTimeout:  10 * time.Second,
}

var dialer = websocket.Dialer{
	Proxy:             http.ProxyFromEnvironment, // agents behind NAT often reach out through one
	HandshakeTimeout:  10 * time.Second,
	ReadBufferSize:    4096,
	WriteBufferSize:   4096,
	WriteBufferPool:   &writePool,
	EnableCompression: false,
}

// Conn is one WebSocket connection.
type Conn struct {
	ws  *websocket.Conn
	bc  *batchConn // the socket under ws, for WriteBatch; nil: write one by one
	wmu sync.Mutex // one writer of data frames at a time
	// pong receives a signal for each pong; Ping waits on it.
	pong chan struct{}
	pmu  sync.Mutex // one Ping at a time
}

func wrap(ws *websocket.Conn, bc *batchConn) *Conn {
	c := &Conn{ws: ws, bc: bc, pong: make(chan struct{}, 1)}
	ws.SetPongHandler(func(string) error {
		select {
		case c.pong <- struct{}{}:
		default:
		}
		return nil
	})
	return c
}

// Accept upgrades an HTTP request to a WebSocket. On failure it has
// answered the request.
func Accept(w http.ResponseWriter, r *http.Request) (*Conn, error) {
	bw := &batchWriter{ResponseWriter: w}
	ws, err := upgrader.Upgrade(bw, r, nil)
	if err != nil {
		return nil, fmt.Errorf("websocket accept: %w", err)
	}
	return wrap(ws, bw.conn), nil
}

// Dial opens a WebSocket to url (ws:// or wss://) within ctx.
func Dial(ctx context.Context, url string) (*Conn, error) {
	var bc *batchConn
	d := dialer
	d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := netDialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		bc = &batchConn{Conn: c}
		return bc, nil
	}
	ws, resp, err := d.DialContext(ctx, url, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("websocket dial: %w (HTTP %d)", err, resp.StatusCode)
		}
		return nil, fmt.Errorf("websocket dial: %w", err)
	}
	return wrap(ws, bc), nil
}

// netDialer makes the TCP connection under a dialed WebSocket (or under its
// proxy's tunnel).
var netDialer net.Dialer

// SetReadLimit bounds a message the peer may send; a larger one closes
// the connection with 1009.
func (c *Conn) SetReadLimit(n int64) { c.ws.SetReadLimit(n) }

// past is a deadline that has passed: setting it makes a blocked read or
// write return at once.
var past = time.Unix(1, 0)

// Read returns the next message. It returns when ctx ends (its deadline,
// or its cancellation); after any error the connection is done, as with
// every WebSocket library.
func (c *Conn) Read(ctx context.Context) ([]byte, error) {
	dl, hasDeadline := ctx.Deadline() // the zero time: no deadline
	if err := c.ws.NetConn().SetReadDeadline(dl); err != nil {
		return nil, fmt.Errorf("websocket read: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.ws.NetConn().SetReadDeadline(past) })
	defer stop()
	_, msg, err := c.ws.ReadMessage()
	if err != nil {
		// The socket's deadline is the context's, so it may fire a moment
		// before the context reports it: either way the context ended it.
		if ctx.Err() != nil || (hasDeadline && !time.Now().Before(dl)) {
			cause := context.Cause(ctx)
			if cause == nil {
				cause = context.DeadlineExceeded
			}
			return nil, fmt.Errorf("websocket read: %w (%w)", cause, err)
		}
		return nil, err
	}
	return msg, nil
}

// Write sends one text message, by ctx's deadline.
func (c *Conn) Write(ctx context.Context, msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.startWrite(ctx); err != nil {
		return err
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
		return fmt.Errorf("websocket write: %w", err)
	}
	return nil
}

// startWrite checks ctx and sets the write deadline to its deadline, for a
// writer holding wmu.
func (c *Conn) startWrite(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("websocket write: %w", context.Cause(ctx))
	}
	dl, _ := ctx.Deadline()
	if err := c.ws.SetWriteDeadline(dl); err != nil {
		return fmt.Errorf("websocket write: %w", err)
	}
	return nil
}

// Ping sends a ping and waits for the pong, which the connection's reader
// (someone must be reading) delivers; it fails when ctx ends first.
func (c *Conn) Ping(ctx context.Context) error {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	select { // a late pong of an earlier ping answers nothing now
	case <-c.pong:
	default:
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(controlWait)
	}
	if err := c.ws.WriteControl(websocket.PingMessage, nil, dl); err != nil {
		return fmt.Errorf("websocket ping: %w", err)
	}
	select {
	case <-c.pong:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("websocket ping: no pong: %w", context.Cause(ctx))
	}
}

// SendPing sends a ping without waiting for its pong, for a side whose
// read deadline already tells a dead peer.
func (c *Conn) SendPing(within time.Duration) error {
	if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(within)); err != nil {
		return fmt.Errorf("websocket ping: %w", err)
	}
	return nil
}

// Close sends a close frame with code and reason and half-closes the
// connection, so the peer reads the frame and then the end; the reader
// here sees the peer's answer. CloseNow releases the connection.
func (c *Conn) Close(code StatusCode, reason string) error {
	err := c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(int(code), reason), time.Now().Add(controlWait))
	if hc, ok := c.ws.NetConn().(interface{ CloseWrite() error }); ok {
		_ = hc.CloseWrite()
	}
	if err != nil && !errors.Is(err, websocket.ErrCloseSent) {
		return fmt.Errorf("websocket close: %w", err)
	}
	return nil
}

// CloseNow closes the connection without a close frame.
func (c *Conn) CloseNow() error { return c.ws.Close() }

// CloseStatus returns the close code the peer sent, if err is the end of a
// connection it closed with one; -1 otherwise.
func CloseStatus(err error) StatusCode {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return StatusCode(ce.Code)
	}
	return -1
}
