package enginesim

import "sync"

// output is the buffer between the engine and the HTTP handler of one
// sequence. The engine appends and never blocks; the handler drains at its
// own pace, so tokens that piled up for a slow client leave in one chunk,
// as vLLM coalesces them.
type output struct {
	mu     sync.Mutex
	text   []byte
	tokens int64  // tokens in text
	finish string // set with the last token
	err    error  // set when the engine failed the sequence
	// notify holds at most one pending wake-up: size 1 so the engine's send
	// never blocks, and a wake-up is never lost.
	notify chan struct{}
}

func newOutput() *output { return &output{notify: make(chan struct{}, 1)} }

// push appends one token and, with the last one, its finish reason.
func (o *output) push(text, finish string) {
	o.mu.Lock()
	o.text = append(o.text, text...)
	o.tokens++
	o.finish = finish
	o.mu.Unlock()
	o.wake()
}

// fail ends the sequence with an error.
func (o *output) fail(err error) {
	o.mu.Lock()
	o.err = err
	o.mu.Unlock()
	o.wake()
}

func (o *output) wake() {
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// take moves the pending text into dst and returns it with its token count
// and the finish reason or error, when the sequence has ended.
func (o *output) take(dst []byte) (text []byte, tokens int64, finish string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	dst = append(dst, o.text...)
	tokens = o.tokens
	o.text = o.text[:0]
	o.tokens = 0
	return dst, tokens, o.finish, o.err
}
