package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/openai"
)

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(c *gin.Context) {
	req, ok := readRequest(c)
	if !ok {
		return
	}
	job := &dispatch.Job{RequestID: c.GetString(ctxRequestID), Model: req.Model, Request: req}
	stream, err := s.cfg.Dispatcher.Dispatch(c.Request.Context(), job)
	if err != nil {
		s.dispatchFailed(c, err)
		return
	}
	defer stream.Close()
	var out Outcome
	if req.Stream {
		out = relayStream(c, stream, req.WantsUsage())
	} else {
		out = relayWhole(c, stream)
	}
	s.cfg.Logger.Info("chat completion", "request_id", job.RequestID, "model", req.Model,
		"stream", req.Stream, "prompt_tokens", out.PromptTokens, "completion_tokens", out.CompletionTokens,
		"outcome", out.State.String())
}

// readRequest decodes and validates the body, answering 400/413 itself.
func readRequest(c *gin.Context) (*openai.ChatCompletionRequest, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(c, http.StatusRequestEntityTooLarge, openai.NewError(openai.TypeInvalidRequest, "request_too_large", "", "request body exceeds "+strconv.Itoa(MaxBodyBytes)+" bytes"))
			return nil, false
		}
		writeError(c, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_body", "", "could not read the request body"))
		return nil, false
	}
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(c, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_json", "", "the request body is not valid JSON: "+err.Error()))
		return nil, false
	}
	if err := req.Validate(); err != nil {
		var fe *openai.FieldError
		param := ""
		if errors.As(err, &fe) {
			param = fe.Param
		}
		writeError(c, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_value", param, err.Error()))
		return nil, false
	}
	return &req, true
}

// dispatchFailed answers a job the dispatcher could not start.
func (s *Server) dispatchFailed(c *gin.Context, err error) {
	var engErr *dispatch.Error
	switch {
	case errors.As(err, &engErr):
		if engErr.RetryAfter > 0 {
			c.Header("Retry-After", strconv.Itoa(int(engErr.RetryAfter.Seconds())))
		}
		status := engErr.Status
		if status >= 500 {
			status = http.StatusBadGateway
		}
		writeError(c, status, engErr.Body)
	case errors.Is(err, dispatch.ErrUnknownModel):
		writeError(c, http.StatusNotFound, openai.NewError(openai.TypeNotFound, "model_not_found", "model", "the model does not exist or is not served"))
	case errors.Is(err, dispatch.ErrNoCapacity):
		c.Header("Retry-After", strconv.Itoa(retryAfterNoCapacity))
		writeError(c, http.StatusServiceUnavailable, openai.NewError(openai.TypeUnavailable, "no_healthy_node", "", "no healthy engine can take the request now; retry later"))
	case c.Request.Context().Err() != nil:
		// The client left before the engine answered: nobody to tell.
	default:
		s.cfg.Logger.Error("dispatch failed", "request_id", c.GetString(ctxRequestID), "err", err)
		writeError(c, http.StatusBadGateway, openai.NewError(openai.TypeServer, "upstream_error", "", "the engine could not be reached"))
	}
}

// retryAfterNoCapacity is the advice, in seconds, when no engine is free:
// a few seconds lets a stream finish or a node come back.
const retryAfterNoCapacity = 5
