package enginesim

import (
	"context"
	"errors"
	"net/http"

	"github.com/llmplat/llmplat/runtime/openai"
)

// eventStreamType is the content type vLLM streams with.
const eventStreamType = "text/event-stream; charset=utf-8"

// serveStream answers a streamed request with vLLM's bytes: headers at
// once, the role chunk with the first token, content chunks (tokens that
// piled up coalesced), the finish reason on the last one, the usage chunk
// when asked for, then [DONE]. An engine failure is an error event under
// the 200 already sent, then [DONE].
func (s *Sim) serveStream(ctx context.Context, w http.ResponseWriter, job *chatJob, seq *sequence) {
	w.Header().Set("Content-Type", eventStreamType)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush() // a client that is gone shows up as the context ending
	cw := s.newChunkWriter(w, job, seq.prompt)
	if err := s.admit(ctx, seq); err != nil {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			_ = cw.fail(err) // nothing more to do if the client is gone
		}
		return
	}
	var (
		buf        []byte
		completion int64
		first      = true
	)
	for {
		if !s.await(ctx, seq) {
			return
		}
		text, n, finish, err := seq.out.take(buf[:0])
		buf = text
		if n > 0 {
			if first {
				if cw.role() != nil {
					s.sched.abort(seq)
					return
				}
				first = false
			}
			completion += n
			if cw.content(text, finish, completion) != nil {
				s.sched.abort(seq)
				return
			}
		}
		switch {
		case err != nil:
			_ = cw.fail(err)
			return
		case finish != "":
			if job.req.WantsUsage() {
				_ = cw.usage(seq.prompt, completion)
			}
			_ = cw.done()
			return
		}
		if rc.Flush() != nil {
			s.sched.abort(seq)
			return
		}
		if stall := s.Faults().StallAfterTokens; stall > 0 && completion >= stall {
			<-ctx.Done() // wedged: nothing more until the client goes
			s.sched.abort(seq)
			return
		}
	}
}

// serveCompletion answers a request that is not streamed, once the answer
// is complete.
func (s *Sim) serveCompletion(ctx context.Context, w http.ResponseWriter, job *chatJob, seq *sequence) {
	if err := s.admit(ctx, seq); err != nil {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			status, msg := failure(err, false)
			writeError(w, status, "", msg)
		}
		return
	}
	var text []byte
	var completion int64
	for {
		if !s.await(ctx, seq) {
			return
		}
		var n int64
		var finish string
		var err error
		text, n, finish, err = seq.out.take(text)
		completion += n
		switch {
		case err != nil:
			status, msg := failure(err, true)
			writeError(w, status, "", msg)
			return
		case finish != "":
			content := string(text)
			writeJSON(w, http.StatusOK, openai.ChatCompletion{
				ID: job.id, Object: openai.ObjectChatCompletion, Created: job.created,
				Model: s.cfg.ServedModelName,
				Choices: []openai.Choice{{
					Message:      openai.ResponseMessage{Role: "assistant", Content: &content},
					Logprobs:     openai.Null(),
					FinishReason: finish,
					StopReason:   openai.Null(),
				}},
				Usage: openai.NewUsage(seq.prompt, completion),
			})
			return
		}
	}
}

// await waits for the engine to add to the sequence's output. When the
// client goes away it aborts the sequence and returns false. When the engine
// stops it fails the sequence first, so the output holds the error.
func (s *Sim) await(ctx context.Context, seq *sequence) bool {
	select {
	case <-seq.out.notify:
		return true
	case <-ctx.Done():
	}
	if errors.Is(context.Cause(ctx), ErrStopped) {
		s.sched.failOne(seq, ErrStopped) // a no-op when stop already failed it
		return true
	}
	s.sched.abort(seq)
	return false
}

// failure maps an engine error to a status and message: a dead engine
// refuses new requests with 503 and fails running ones with 500.
func failure(err error, running bool) (int, string) {
	switch {
	case errors.Is(err, ErrStopped):
		return http.StatusServiceUnavailable, "The engine is shutting down."
	case errors.Is(err, ErrEngineDead) && running:
		return http.StatusInternalServerError, "EngineCore died while generating (injected fault)."
	case errors.Is(err, ErrEngineDead):
		return http.StatusServiceUnavailable, "The engine is dead."
	}
	return http.StatusInternalServerError, err.Error()
}

// chunkWriter writes the events of one stream.
type chunkWriter struct {
	sse   *openai.SSEWriter
	chunk openai.ChatCompletionChunk
	// continuous puts the running usage on every chunk, as vLLM does for
	// stream_options {include_usage, continuous_usage_stats}; prompt is the
	// count it reports.
	continuous bool
	prompt     int64
}

func (s *Sim) newChunkWriter(w http.ResponseWriter, job *chatJob, prompt int64) *chunkWriter {
	so := job.req.StreamOptions
	continuous := so != nil && so.IncludeUsage && so.ContinuousUsageStats != nil && *so.ContinuousUsageStats
	return &chunkWriter{sse: openai.NewSSEWriter(w), continuous: continuous, prompt: prompt, chunk: openai.ChatCompletionChunk{
		ID:      job.id,
		Object:  openai.ObjectChatCompletionChunk,
		Created: job.created,
		Model:   job.req.Model,
		Choices: make([]openai.ChunkChoice, 1),
	}}
}

func (c *chunkWriter) role() error {
	c.chunk.Choices[0] = openai.ChunkChoice{Delta: openai.Delta{Role: "assistant", Content: openai.String("")}}
	return c.write(0)
}

// content writes a content chunk; completion is the count so far.
func (c *chunkWriter) content(text []byte, finish string, completion int64) error {
	t := string(text)
	ch := openai.ChunkChoice{Delta: openai.Delta{Content: &t}}
	if finish != "" {
		ch.FinishReason = &finish
		ch.StopReason = openai.Null()
	}
	c.chunk.Choices[0] = ch
	return c.write(completion)
}

// write writes the current chunk, with the running usage when asked.
func (c *chunkWriter) write(completion int64) error {
	c.chunk.Usage = nil
	if c.continuous {
		c.chunk.Usage = openai.NewUsage(c.prompt, completion)
	}
	return c.sse.WriteJSON(&c.chunk)
}

func (c *chunkWriter) usage(prompt, completion int64) error {
	u := c.chunk
	u.Choices = []openai.ChunkChoice{}
	u.Usage = nil
	u.Usage = openai.NewUsage(prompt, completion)
	return c.sse.WriteJSON(&u)
}

// fail writes a mid-stream error event, then [DONE].
func (c *chunkWriter) fail(err error) error {
	status, msg := failure(err, true)
	if werr := c.sse.WriteData(openai.NewEngineError(status, "", msg).Marshal()); werr != nil {
		return werr
	}
	return c.done()
}

func (c *chunkWriter) done() error { return c.sse.WriteDone() }
