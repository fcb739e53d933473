package enginesim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// maxRequestBody bounds a chat request body: 32 MiB holds a prompt of
// max_model_len tokens of any text, with room for inline images.
const maxRequestBody = 32 << 20

// requestError is a request the simulator refuses, as vLLM would.
type requestError struct {
	status int
	param  string
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *requestError {
	return &requestError{status: http.StatusBadRequest, param: param, msg: fmt.Sprintf(format, args...)}
}

// chatJob is a validated chat request and the engine's view of it.
type chatJob struct {
	id        string
	created   int64
	req       openai.ChatCompletionRequest
	prompt    int64
	maxTokens int64
	minTokens int64
	ignoreEOS bool
}

func (s *Sim) handleChat(w http.ResponseWriter, r *http.Request) {
	ctx, release := s.life.bind(r.Context())
	defer release()
	job, rerr := s.parseChat(w, r)
	if rerr != nil {
		writeError(w, rerr.status, rerr.param, rerr.msg)
		return
	}
	if s.drawError() {
		writeError(w, http.StatusInternalServerError, "", "internal server error (injected fault)")
		return
	}
	seq := s.newSequence(job)
	if job.req.Stream {
		s.serveStream(ctx, w, job, seq)
		return
	}
	s.serveCompletion(ctx, w, job, seq)
}

// parseChat reads, decodes and checks a request in vLLM's order.
func (s *Sim) parseChat(w http.ResponseWriter, r *http.Request) (*chatJob, *requestError) {
	if err := s.available(); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		return nil, badRequest("", "read body: %v", err)
	}
	job := &chatJob{id: s.cfg.NewID(), created: s.cfg.WallClock().Unix()}
	if err := json.Unmarshal(body, &job.req); err != nil {
		return nil, badRequest("", "invalid JSON body: %v", err)
	}
	req := &job.req
	if req.Model == "" {
		req.Model = s.cfg.ServedModelName // vLLM serves its one model when none is named
	}
	if req.Model != s.cfg.ServedModelName {
		return nil, &requestError{status: http.StatusNotFound, param: "model",
			msg: fmt.Sprintf("The model `%s` does not exist.", req.Model)}
	}
	if err := req.Validate(); err != nil {
		var fe *openai.FieldError
		if errors.As(err, &fe) {
			return nil, badRequest(fe.Param, "%s", fe.Msg)
		}
		return nil, badRequest("", "%v", err)
	}
	if err := extra(req, "ignore_eos", &job.ignoreEOS); err != nil {
		return nil, err
	}
	if err := extra(req, "min_tokens", &job.minTokens); err != nil {
		return nil, err
	}
	return job, s.fitContext(job)
}

// fitContext checks the prompt and the answer against max_model_len and
// sets the answer's limit: max_tokens, or what the context has left.
func (s *Sim) fitContext(job *chatJob) *requestError {
	limit := s.cfg.MaxModelLen
	job.prompt = tokens.ChatPromptTokens(job.req.Messages)
	if job.prompt >= limit {
		return badRequest("input_tokens", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.",
			limit, job.prompt)
	}
	job.maxTokens = job.req.MaxOutputTokens()
	if job.maxTokens == 0 {
		job.maxTokens = limit - job.prompt
	}
	if job.prompt+job.maxTokens > limit {
		return badRequest("input_tokens", "'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
			job.maxTokens, limit, job.prompt, job.maxTokens, limit, job.prompt)
	}
	if job.minTokens < 0 || job.minTokens > job.maxTokens {
		return badRequest("min_tokens", "min_tokens must be between 0 and max_tokens=%d, got %d", job.maxTokens, job.minTokens)
	}
	return nil
}

// extra decodes one of vLLM's extension fields when the request has it.
func extra(req *openai.ChatCompletionRequest, name string, v any) *requestError {
	raw, ok := req.Extra[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return badRequest(name, "invalid %s: %v", name, err)
	}
	return nil
}

// available refuses work while the model loads, after the engine died and
// once it stopped.
func (s *Sim) available() *requestError {
	switch {
	case s.life.isStopped():
		return &requestError{status: http.StatusServiceUnavailable, msg: "The engine is shutting down."}
	case !s.loaded.Load():
		return &requestError{status: http.StatusServiceUnavailable, msg: "The model is still loading."}
	case s.sched.isDead():
		return &requestError{status: http.StatusServiceUnavailable, msg: "The engine is dead."}
	}
	return nil
}

func (s *Sim) newSequence(job *chatJob) *sequence {
	gen := newGenerator(s.cfg.Seed, &job.req)
	return &sequence{
		prompt:    job.prompt,
		maxTokens: job.maxTokens,
		target:    max(gen.answerLength(s.cfg.MeanAnswerTokens), job.minTokens),
		ignoreEOS: job.ignoreEOS,
		gen:       gen,
		arrival:   s.clock.Now(),
		out:       newOutput(),
	}
}

// admit applies the hang and slow-start faults, then queues the sequence.
// It returns the context's cause when the request ended first, or the
// engine's error when it refused the sequence.
func (s *Sim) admit(ctx context.Context, seq *sequence) error {
	s.faultsMu.Lock()
	hang, slow := s.faults.Hang, s.faults.SlowStart
	s.faultsMu.Unlock()
	if hang {
		s.hung.Add(1)
		defer s.hung.Add(-1)
		<-ctx.Done()
		return context.Cause(ctx)
	}
	if slow > 0 && s.clock.Sleep(ctx, time.Duration(slow)) != nil {
		return context.Cause(ctx)
	}
	return s.sched.submit(seq)
}
