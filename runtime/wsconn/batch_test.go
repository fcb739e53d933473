package wsconn

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func TestWriteBatchIsOneSocketWrite(t *testing.T) {
	client, server := pair(t)
	for _, tc := range []struct {
		name     string
		from, to *Conn
	}{
		{"dialed side", client, server},
		{"accepted side", server, client},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.from.bc == nil {
				t.Fatal("the connection has no batching socket under it")
			}
			counter := &countingConn{Conn: tc.from.bc.Conn}
			tc.from.bc.Conn = counter
			// A message larger than gorilla's write buffer goes out in
			// several frames: they gather too.
			big := bytes.Repeat([]byte("x"), 10_000)
			msgs := [][]byte{[]byte("one"), big, []byte("three"), []byte("four")}
			if err := tc.from.WriteBatch(t.Context(), msgs); err != nil {
				t.Fatal(err)
			}
			if got := counter.writes.Load(); got != 1 {
				t.Errorf("socket writes = %d, want 1", got)
			}
			for i, want := range msgs {
				got, err := tc.to.Read(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("message %d = %.20q (%d bytes), want %.20q (%d bytes)", i, got, len(got), want, len(want))
				}
			}
		})
	}
}

func TestWriteBatchKeepsOrderWithOtherWriters(t *testing.T) {
	client, server := pair(t)
	const writers, batches, perBatch = 4, 50, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				msgs := make([][]byte, perBatch)
				for i := range msgs {
					msgs[i] = fmt.Appendf(nil, "%d/%d/%d", w, b, i)
				}
				if err := client.WriteBatch(t.Context(), msgs); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	// Pings go out between the batches, outside their mutex.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = client.SendPing(time.Second)
		}
	}()
	next := make([]int, writers) // the next message each writer must send
	prev := ""
	for range writers * batches * perBatch {
		msg, err := server.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var w, b, i int
		if _, err := fmt.Sscanf(string(msg), "%d/%d/%d", &w, &b, &i); err != nil {
			t.Fatalf("message %q: %v", msg, err)
		}
		if got, want := b*perBatch+i, next[w]; got != want {
			t.Fatalf("writer %d: got message %d, want %d: a batch was split or reordered", w, got, want)
		}
		if i > 0 && prev != fmt.Sprintf("%d/%d/%d", w, b, i-1) {
			t.Fatalf("message %q follows %q: a batch was interleaved", msg, prev)
		}
		next[w]++
		prev = string(msg)
	}
	close(stop)
	wg.Wait()
}
