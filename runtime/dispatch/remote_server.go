package dispatch

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmplat/llmplat/runtime/openai"
)

// MaxJobBytes bounds a job's body on the internal endpoint: the gateway
// already refused anything over its own 8 MiB limit, and re-encoding adds
// only the stream options.
const MaxJobBytes = 8<<20 + 64<<10

// maxRequestIDLen bounds the X-Request-Id a gateway sends: the id becomes a
// Redis key and a frame field on the node's socket.
const maxRequestIDLen = 128

// NewRemoteHandler serves RemotePath for gateways: it checks the shared
// internal token, hands the job to d and streams d's events back as
// server-sent events, ending with [DONE] only when d's stream ended with
// the engine's. A broken stream ends the response without [DONE], so the
// gateway sees it broken too. The gateway closing the request aborts the
// job. logger may be nil.
func NewRemoteHandler(d Dispatcher, token string, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &remoteHandler{d: d, token: []byte("Bearer " + token), logger: logger}
	mux := http.NewServeMux()
	mux.Handle("POST "+RemotePath, h)
	return mux
}

type remoteHandler struct {
	d      Dispatcher
	token  []byte
	logger *slog.Logger
}

func (h *remoteHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(h.token) == len("Bearer ") || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), h.token) != 1 {
		writeRemoteError(w, http.StatusUnauthorized, openai.NewError(openai.TypeAuthentication, "invalid_internal_token", "", "internal dispatch needs the platform's internal token"))
		return
	}
	id := r.Header.Get("X-Request-Id")
	if !validRequestID(id) {
		writeRemoteError(w, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_request_id", "", "X-Request-Id must be 1–"+strconv.Itoa(maxRequestIDLen)+" bytes of [A-Za-z0-9._-]"))
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxJobBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeRemoteError(w, http.StatusRequestEntityTooLarge, openai.NewError(openai.TypeInvalidRequest, "request_too_large", "", "job body exceeds "+strconv.Itoa(MaxJobBytes)+" bytes"))
			return
		}
		writeRemoteError(w, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_body", "", "could not read the job body"))
		return
	}
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		writeRemoteError(w, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_body", "", "the job body is not a chat completion request: "+err.Error()))
		return
	}
	if req.Model == "" {
		writeRemoteError(w, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "missing_model", "model", "the job names no model"))
		return
	}
	ctx := r.Context()
	st, err := h.d.Dispatch(ctx, &Job{RequestID: id, Model: req.Model, Request: &req})
	if err != nil {
		h.refuse(w, id, err)
		return
	}
	defer st.Close()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	sse := openai.NewSSEWriter(w)
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			if sse.WriteDone() == nil {
				_ = rc.Flush()
			}
			return
		}
		if err != nil {
			// No [DONE]: the gateway reads the end as a broken stream and
			// settles what it relayed.
			if ctx.Err() == nil {
				h.logger.Warn("dispatch stream broke", "request_id", id, "err", err)
			}
			return
		}
		if sse.WriteData(ev.Data) != nil || rc.Flush() != nil {
			return // the gateway went away; Close aborts the job
		}
	}
}

// refuse answers a job that could not start, in the codes Remote maps back.
func (h *remoteHandler) refuse(w http.ResponseWriter, id string, err error) {
	var e *Error
	switch {
	case errors.As(err, &e):
		if e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter/time.Second)))
		}
		body := e.Body
		if body == nil {
			body = openai.NewEngineError(e.Status, "", http.StatusText(e.Status))
		}
		writeRemoteError(w, e.Status, body)
	case errors.Is(err, ErrNoCapacity):
		writeRemoteError(w, http.StatusServiceUnavailable, openai.NewError(openai.TypeUnavailable, codeNoCapacity, "", err.Error()))
	case errors.Is(err, ErrUnknownModel):
		writeRemoteError(w, http.StatusNotFound, openai.NewError(openai.TypeNotFound, codeUnknownModel, "model", err.Error()))
	case errors.Is(err, ErrNoHealthyNode):
		writeRemoteError(w, http.StatusServiceUnavailable, openai.NewError(openai.TypeUnavailable, codeNoHealthy, "", err.Error()))
	default:
		h.logger.Warn("dispatch failed", "request_id", id, "err", err)
		writeRemoteError(w, http.StatusBadGateway, openai.NewError(openai.TypeServer, "dispatch_failed", "", "the orchestrator could not start the job"))
	}
}

func writeRemoteError(w http.ResponseWriter, status int, body *openai.ErrorBody) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body.Marshal())
}

// validRequestID is the node protocol's id rule, kept here so dispatch does
// not depend on the protocol package.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	return strings.IndexFunc(id, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-')
	}) < 0
}
