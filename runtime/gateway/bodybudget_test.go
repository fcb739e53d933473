package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/hostilebody"
)

// expired is a context that has ended: a take that must wait fails at
// once.
func expired() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestBodyBudgetKeepsRoomForSmallBodies: large bodies together stop short
// of the reserve, which small bodies can always take; one large body
// larger than the budget goes alone; a refused take holds nothing.
func TestBodyBudgetKeepsRoomForSmallBodies(t *testing.T) {
	const limit = 1000 // reserve 250
	for _, tc := range []struct {
		name  string
		held  [2]int64 // small, large
		class int
		w     int64
		fits  bool
	}{
		{"a large body in an empty budget", [2]int64{}, large, 750, true},
		{"a large body into the reserve", [2]int64{0, 700}, large, 100, false},
		{"a large body larger than the budget, alone", [2]int64{}, large, 5000, true},
		{"a large body larger than the budget, beside another", [2]int64{0, 10}, large, 5000, false},
		{"a large body beside small ones", [2]int64{200, 500}, large, 250, true},
		{"a small body beside large ones up to the budget", [2]int64{0, 750}, small, 250, true},
		{"a small body past the budget but within the reserve", [2]int64{0, 5000}, small, 250, true},
		{"a small body past the budget and the reserve", [2]int64{200, 750}, small, 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBodyBudget(limit, time.Second, nil)
			b.used = tc.held
			err := b.take(expired(), tc.class, tc.w)
			if tc.fits != (err == nil) {
				t.Fatalf("take: %v, want it to fit: %v", err, tc.fits)
			}
			want := tc.held
			if tc.fits {
				want[tc.class] += tc.w
			} else if !errors.Is(err, errBodyBudget) {
				t.Errorf("refused with %v, want errBodyBudget", err)
			}
			if got := b.inUse(); got != want {
				t.Errorf("in use %v, want %v", got, want)
			}
		})
	}
}

// TestBodyBudgetWakesWaiters: a body waiting for room takes it when
// another gives its weight back, and the weight returns in full when
// released, whatever class each part was taken in.
func TestBodyBudgetWakesWaiters(t *testing.T) {
	b := newBodyBudget(1000, time.Minute, nil)
	first := &heldBody{b: b}
	if err := first.grow(context.Background(), smallBodyBytes, 100); err != nil {
		t.Fatal(err)
	}
	if err := first.grow(context.Background(), 2*smallBodyBytes, 700); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	second := &heldBody{b: b}
	go func() { done <- second.grow(context.Background(), 2*smallBodyBytes, 700) }()
	select {
	case err := <-done:
		t.Fatalf("the second large body took room that was not there: %v", err)
	default:
	}
	first.release()
	first.release() // a second release gives nothing back twice
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiting body: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiting body was not woken by the release")
	}
	if got, want := b.inUse(), [2]int64{0, 700}; got != want {
		t.Errorf("in use %v, want %v", got, want)
	}
	second.release()
	if got := b.inUse(); got != ([2]int64{}) {
		t.Errorf("in use %v after every release, want none", got)
	}
}

// TestChunkedBodies: a body of unknown length is read whole as it grows,
// weighed as it grows and given back once released; past MaxBodyBytes it
// is refused with 413.
func TestChunkedBodies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		status int
	}{
		{"a small body", chatBody("llama-8b", false, 5), http.StatusOK},
		{"three MiB of messages", hostilebody.Messages(60_000), http.StatusOK},
		{"past the limit", hostilebody.Shapes[0].Build(MaxBodyBytes + 1<<20), http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{cfg: Config{Metrics: NewMetrics(nil)}, bodies: newBodyBudget(DefaultBodyBudget, DefaultBodyWait, nil)}
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", io.NopCloser(strings.NewReader(tc.body)))
			c.Request.ContentLength = -1
			req, _, held, ok := s.readRequest(c, nil)
			status := http.StatusOK
			if !ok {
				status = w.Code
			}
			if status != tc.status {
				t.Fatalf("status %d (%s), want %d", status, w.Body.String(), tc.status)
			}
			if ok {
				if len(req.Messages) == 0 {
					t.Error("the body decoded to no messages")
				}
				if used := s.bodies.inUse(); used[small]+used[large] < int64(len(tc.body)) {
					t.Errorf("the held weight %v is less than the body's %d bytes", used, len(tc.body))
				}
				held.release()
			}
			if used := s.bodies.inUse(); used != ([2]int64{}) {
				t.Errorf("weight %v still held", used)
			}
		})
	}
}
