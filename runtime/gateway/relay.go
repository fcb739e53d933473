package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/openai"
)

// State is how a relayed request ended.
type State int

// The ways a relayed request ends. The ledger settles Completed with the
// engine's usage, ClientGone and Broken with the tokens counted so far.
const (
	Completed  State = iota // the engine finished and reported usage
	ClientGone              // the client disconnected mid-stream
	Broken                  // the engine or the link to it failed mid-stream
)

func (s State) String() string {
	return [...]string{"completed", "client_gone", "broken"}[s]
}

// Outcome is what the ledger needs to settle a relayed request.
type Outcome struct {
	State State
	// PromptTokens and CompletionTokens are the engine's exact usage when
	// State is Completed; otherwise CompletionTokens counts the content
	// chunks relayed and PromptTokens is zero (unknown).
	PromptTokens     int64
	CompletionTokens int64
}

// relayStream copies the engine's events to the client as they arrive,
// dropping the usage chunk the client did not ask for.
func relayStream(c *gin.Context, stream dispatch.Stream, wantUsage bool) Outcome {
	w := c.Writer
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sse := openai.NewSSEWriter(w)
	var out Outcome
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			_ = sse.WriteDone()
			w.Flush()
			return out
		}
		if err != nil {
			if c.Request.Context().Err() != nil {
				out.State = ClientGone
				return out
			}
			out.State = Broken
			_ = sse.WriteJSON(openai.NewError(openai.TypeServer, "engine_failed", "", "the engine failed mid-stream"))
			_ = sse.WriteDone()
			w.Flush()
			return out
		}
		out.CompletionTokens += ev.Tokens
		if ev.Usage != nil {
			out.PromptTokens, out.CompletionTokens = ev.Usage.PromptTokens, ev.Usage.CompletionTokens
			if !wantUsage {
				continue
			}
		}
		if ev.Err != nil {
			out.State = Broken
		}
		if err := sse.WriteData(ev.Data); err != nil {
			out.State = ClientGone
			return out
		}
		w.Flush()
	}
}

// relayWhole builds a non-streamed answer from the engine's stream.
func relayWhole(c *gin.Context, stream dispatch.Stream) Outcome {
	var (
		out     Outcome
		content strings.Builder
		resp    = openai.ChatCompletion{Object: openai.ObjectChatCompletion}
		finish  = openai.FinishStop
	)
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || ev.Err != nil {
			out.State = Broken
			if c.Request.Context().Err() != nil {
				out.State = ClientGone
				return out
			}
			writeError(c, http.StatusBadGateway, openai.NewError(openai.TypeServer, "engine_failed", "", "the engine failed before the answer was complete"))
			return out
		}
		out.CompletionTokens += ev.Tokens
		if ev.Usage != nil {
			out.PromptTokens, out.CompletionTokens = ev.Usage.PromptTokens, ev.Usage.CompletionTokens
			resp.Usage = ev.Usage
			continue
		}
		var chunk openai.ChatCompletionChunk
		if json.Unmarshal(ev.Data, &chunk) != nil {
			continue
		}
		resp.ID, resp.Created, resp.Model = chunk.ID, chunk.Created, chunk.Model
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != nil {
				content.WriteString(*ch.Delta.Content)
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	text := content.String()
	resp.Choices = []openai.Choice{{
		Message:      openai.ResponseMessage{Role: "assistant", Content: &text},
		Logprobs:     openai.Null(),
		FinishReason: finish,
	}}
	c.JSON(http.StatusOK, resp)
	return out
}
