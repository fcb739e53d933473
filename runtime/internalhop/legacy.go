package internalhop

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// The previous release's gateways post the OpenAI request itself as JSON,
// without the envelope's headers, and read the engine's events back as
// server-sent events, which they parse again. A replica serves them too, so
// that a rollout that updates the orchestrators first drops no request
// while old gateways still run; a gateway of this release that meets an
// older replica waits for another (Remote: dispatch.ErrNoCapacity). This
// path goes once no gateway of the previous release runs.

// legacyJob reads a previous release's job: the request as JSON. Its
// prompt is estimated here, as that release's replica did, since its
// gateway sent no estimate. It answers a body that is too large itself
// (nil, nil).
func legacyJob(w http.ResponseWriter, r *http.Request, id string) (*dispatch.Job, *openai.ErrorBody) {
	raw, bad := readBody(w, r)
	if raw == nil {
		return nil, bad
	}
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_body", "", "the job body is not a chat completion request: "+err.Error())
	}
	if req.Model == "" {
		return nil, openai.NewError(openai.TypeInvalidRequest, "missing_model", "model", "the job names no model")
	}
	job, err := dispatch.NewJob(id, &req, tokens.EstimateRequest(&req))
	if err != nil {
		return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_body", "", "the job body could not be encoded for the engine")
	}
	return job, nil
}

// relayLegacy streams st to a previous release's gateway as server-sent
// events, the engine's bytes as they came, ending with [DONE] only when
// the engine's stream ended whole.
func (h *remoteHandler) relayLegacy(w http.ResponseWriter, id string, st dispatch.Stream, ctxErr func() error) {
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
			if ctxErr() == nil {
				h.logger.Warn("dispatch stream broke", "request_id", id, "err", err)
			}
			return
		}
		if sse.WriteData(ev.Data) != nil || rc.Flush() != nil {
			return
		}
	}
}
