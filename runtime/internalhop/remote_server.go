package internalhop

import (
	"crypto/subtle"
	"errors"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmplat/llmplat/runtime/openai"
)

// MaxJobBytes bounds a job's body on the internal endpoint: the gateway
// already refused anything over its own 8 MiB limit, and its encoding for
// the engine adds only the stream options.
const MaxJobBytes = 8<<20 + 64<<10

// maxRequestIDLen bounds the X-Request-Id a gateway sends: the id becomes a
// Redis key and a frame field on the node's socket.
const maxRequestIDLen = 128

// NewRemoteHandler serves RemotePath for gateways: it checks the shared
// internal token, hands the job to d and streams d's events back as
// records of its events and what was read of them (EventsType), ending
// with the end record only when d's stream ended with the engine's. A
// broken stream ends the response without it, so the gateway sees it
// broken too. The gateway closing the request aborts the
// job. logger may be nil.
func NewRemoteHandler(d dispatch.Dispatcher, token string, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &remoteHandler{d: d, token: []byte("Bearer " + token), logger: logger}
	mux := http.NewServeMux()
	mux.Handle("POST "+RemotePath, h)
	return mux
}

type remoteHandler struct {
	d      dispatch.Dispatcher
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
	legacy := r.Header.Get(headerModel) == "" // a gateway of the previous release
	var (
		job *dispatch.Job
		bad *openai.ErrorBody
	)
	if legacy {
		job, bad = legacyJob(w, r, id)
	} else {
		job, bad = readJob(w, r, id)
	}
	if bad != nil {
		writeRemoteError(w, http.StatusBadRequest, bad)
		return
	}
	if job == nil {
		return // answered: too large
	}
	ctx := r.Context()
	st, err := h.d.Dispatch(ctx, job)
	if err != nil {
		h.refuse(w, id, err)
		return
	}
	defer st.Close()
	if legacy {
		h.relayLegacy(w, id, st, ctx.Err)
		return
	}

	w.Header().Set("Content-Type", EventsType)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	buf := make([]byte, 0, 1<<10)
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			if _, err := w.Write([]byte{tagDone}); err == nil {
				_ = rc.Flush()
			}
			return
		}
		if err != nil {
			// No end record: the gateway reads the end as a broken stream
			// and settles what it relayed.
			if ctx.Err() == nil {
				h.logger.Warn("dispatch stream broke", "request_id", id, "err", err)
			}
			return
		}
		buf = appendEvent(buf[:0], &ev)
		if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
			return // the gateway went away; Close aborts the job
		}
	}
}

// readJob reads the job's envelope: its headers and its members. It
// answers a body that is too large itself (nil, nil); a bad envelope is
// the returned error body.
func readJob(w http.ResponseWriter, r *http.Request, id string) (*dispatch.Job, *openai.ErrorBody) {
	model := r.Header.Get(headerModel)
	if model == "" || len(model) > maxModelLen {
		return nil, openai.NewError(openai.TypeInvalidRequest, "missing_model", "model", "the job names no model (1–"+strconv.Itoa(maxModelLen)+" bytes in "+headerModel+")")
	}
	estimate, err1 := strconv.ParseInt(r.Header.Get(headerEstimate), 10, 64)
	maxOut, err2 := strconv.ParseInt(r.Header.Get(headerMaxOut), 10, 64)
	if err1 != nil || err2 != nil || estimate < 0 || maxOut < 0 {
		return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_envelope", "", "the job's "+headerEstimate+" and "+headerMaxOut+" must be counts")
	}
	members, bad := readBody(w, r)
	if members == nil {
		return nil, bad
	}
	// The members follow the model in an object: a comma first, the
	// object's end last. The gateway encoded them (dispatch.NewJob); the
	// engine reads them.
	if len(members) < 2 || members[0] != ',' || members[len(members)-1] != '}' {
		return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_body", "", "the job body is not an engine request's members")
	}
	return &dispatch.Job{RequestID: id, Model: model, PromptEstimate: estimate, MaxOutput: maxOut, Members: members}, nil
}

// readBody reads a job's body, at most MaxJobBytes. A body that is too
// large is answered here (nil, nil); one that cannot be read is the
// returned error body.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *openai.ErrorBody) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxJobBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeRemoteError(w, http.StatusRequestEntityTooLarge, openai.NewError(openai.TypeInvalidRequest, "request_too_large", "", "job body exceeds "+strconv.Itoa(MaxJobBytes)+" bytes"))
			return nil, nil
		}
		return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_body", "", "could not read the job body")
	}
	if raw == nil {
		raw = []byte{} // read, and empty
	}
	return raw, nil
}

// maxModelLen bounds the model a job names.
const maxModelLen = 256

// refuse answers a job that could not start, in the codes Remote maps back.
func (h *remoteHandler) refuse(w http.ResponseWriter, id string, err error) {
	var e *dispatch.Error
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
	case errors.Is(err, dispatch.ErrNoCapacity):
		writeRemoteError(w, http.StatusServiceUnavailable, openai.NewError(openai.TypeUnavailable, codeNoCapacity, "", err.Error()))
	case errors.Is(err, dispatch.ErrUnknownModel):
		writeRemoteError(w, http.StatusNotFound, openai.NewError(openai.TypeNotFound, codeUnknownModel, "model", err.Error()))
	case errors.Is(err, dispatch.ErrNoHealthyNode):
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
