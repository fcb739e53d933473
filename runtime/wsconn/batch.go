package wsconn

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/gorilla/websocket"
)

// maxHeldBuffer is the largest gathering buffer given back to the pool: a
// rare huge batch does not pin its memory.
const maxHeldBuffer = 64 << 10

// heldPool lends a socket its gathering buffer for the time of one batch,
// so idle sockets hold none.
var heldPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// batchConn is the socket under gorilla. Its writes go straight through,
// except while a batch is held: then they gather, and the batch's end
// writes them all at once. A node socket carries many small frames (a
// chunk per engine event); one write per frame cost a syscall and a trip
// through the TCP stack each.
type batchConn struct {
	net.Conn
	mu   sync.Mutex // orders writes with a batch's flush
	held *[]byte    // non-nil while a batch is held
}

// Write implements net.Conn.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held != nil {
		*b.held = append(*b.held, p...)
		return len(p), nil
	}
	return b.Conn.Write(p)
}

// hold starts gathering writes.
func (b *batchConn) hold() {
	b.mu.Lock()
	b.held = heldPool.Get().(*[]byte)
	b.mu.Unlock()
}

// flush ends the batch: what gathered goes out in one write, within the
// write deadline the last frame set.
func (b *batchConn) flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	held := b.held
	b.held = nil
	var err error
	if len(*held) > 0 {
		_, err = b.Conn.Write(*held)
	}
	if cap(*held) <= maxHeldBuffer {
		*held = (*held)[:0]
		heldPool.Put(held)
	}
	return err
}

// CloseWrite half-closes the socket where the transport can.
func (b *batchConn) CloseWrite() error {
	if hc, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return nil
}

// batchWriter hands gorilla's upgrade a batchConn in place of the
// hijacked connection.
type batchWriter struct {
	http.ResponseWriter
	conn *batchConn
}

// Hijack implements http.Hijacker.
func (w *batchWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &batchConn{Conn: c}
	return w.conn, brw, nil
}

// WriteBatch sends msgs as text messages, in order, in one write to the
// socket, by ctx's deadline. A failed batch leaves the connection done, as
// any failed write does.
func (c *Conn) WriteBatch(ctx context.Context, msgs [][]byte) error {
	if len(msgs) == 1 || c.bc == nil {
		for _, m := range msgs {
			if err := c.Write(ctx, m); err != nil {
				return err
			}
		}
		return nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.startWrite(ctx); err != nil {
		return err
	}
	c.bc.hold()
	for _, m := range msgs {
		if err := c.ws.WriteMessage(websocket.TextMessage, m); err != nil {
			_ = c.bc.flush()
			return fmt.Errorf("websocket write: %w", err)
		}
	}
	if err := c.bc.flush(); err != nil {
		return fmt.Errorf("websocket write: %w", err)
	}
	return nil
}
