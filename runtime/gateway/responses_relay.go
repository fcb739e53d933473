package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/openai"
)

// The Responses stream's event types, as the OpenAI SDKs parse them.
const (
	evCreated         = "response.created"
	evInProgress      = "response.in_progress"
	evItemAdded       = "response.output_item.added"
	evPartAdded       = "response.content_part.added"
	evTextDelta       = "response.output_text.delta"
	evTextDone        = "response.output_text.done"
	evPartDone        = "response.content_part.done"
	evItemDone        = "response.output_item.done"
	evArgumentsDone   = "response.function_call_arguments.done"
	evCompleted       = "response.completed"
	evIncomplete      = "response.incomplete"
	evFailed          = "response.failed"
	itemMessage       = "message"
	itemFunctionCall  = "function_call"
	statusInProgress  = openai.ResponseInProgress
	statusCompleted   = openai.ResponseCompleted
	statusIncomplete  = openai.ResponseIncomplete
	incompleteLength  = "max_output_tokens"
	responseIDPrefix  = "resp_"
	messageIDPrefix   = "msg_"
	functionIDPrefix  = "fc_"
	requestIDPrefix   = "req_"
	emptyLogprobsJSON = "[]"
)

// responseIdentity is what names a response: its ids, the model the
// client named, its creation time.
type responseIdentity struct {
	id, msgID, model string
	created          int64
}

// name sets the response's ids (from the request's), model and creation
// time.
func (api *responsesAPI) name(requestID, model string, start time.Time) {
	tail := strings.TrimPrefix(requestID, requestIDPrefix)
	api.ident = responseIdentity{id: responseIDPrefix + tail, msgID: messageIDPrefix + tail, model: model, created: start.Unix()}
}

// response is the response object in status, with output and usage.
func (api *responsesAPI) response(status string, output []openai.ResponseItem, usage *openai.ResponseUsage) *openai.Response {
	if output == nil {
		output = []openai.ResponseItem{}
	}
	resp := &openai.Response{ID: api.ident.id, Object: openai.ObjectResponse, CreatedAt: api.ident.created, Status: status,
		Instructions: api.instructions, MaxOutputTokens: api.maxOutputTokens, Model: api.ident.model, Output: output,
		ParallelToolCalls: api.parallelToolCalls, Temperature: api.temperature, TopP: api.topP, ToolChoice: api.toolChoice,
		Tools: api.tools, Truncation: api.truncation, Text: api.text, Metadata: api.metadata, Usage: usage}
	if status == statusIncomplete {
		resp.IncompleteDetails = &openai.IncompleteDetails{Reason: incompleteLength}
	}
	return resp
}

// status is how the answer so far ends: incomplete when the engine stopped
// at the output cap.
func (api *responsesAPI) status() string {
	if api.ans.finish == openai.FinishLength {
		return statusIncomplete
	}
	return statusCompleted
}

// output is the answer as output items: the message (its text so far),
// then one function call item per tool call. An answer that is only tool
// calls has no message, as OpenAI sends it.
func (api *responsesAPI) output(status string) []openai.ResponseItem {
	var items []openai.ResponseItem
	if api.hasMessage() {
		items = append(items, api.message(status, api.ans.content.String()))
	}
	for i, c := range api.ans.calls {
		items = append(items, openai.ResponseItem{Type: itemFunctionCall, ID: functionIDPrefix + api.ident.id[len(responseIDPrefix):] + "_" + strconv.Itoa(i),
			Status: statusCompleted, CallID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return items
}

// hasMessage reports whether the answer has a message item: it has text,
// or no tool call (an empty answer is an empty message), or its message
// was opened in the stream already.
func (api *responsesAPI) hasMessage() bool {
	return api.opened || api.ans.content.Len() > 0 || len(api.ans.calls) == 0
}

func (api *responsesAPI) message(status, text string) openai.ResponseItem {
	content := []openai.ResponseContent{}
	if status != statusInProgress {
		content = append(content, openai.NewOutputText(text))
	}
	return openai.ResponseItem{Type: itemMessage, ID: api.ident.msgID, Status: status, Role: "assistant", Content: content}
}

// responseUsage is u, the bill, in the Responses API's names.
func responseUsage(u ledger.Usage) *openai.ResponseUsage {
	return &openai.ResponseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		TotalTokens: addSaturating(u.PromptTokens, u.CompletionTokens)}
}

// billed is the usage the request is billed so far (billOf, the settle's
// own rule); nil when nothing is billed.
func (r *relay) billed() *openai.ResponseUsage {
	if b := billOf(r.out, r.held); b.settle {
		return responseUsage(b.usage)
	}
	return nil
}

// event writes one stream event, numbered.
func (api *responsesAPI) event(sse *openai.SSEWriter, ev openai.ResponseEvent) error {
	ev.SequenceNumber = api.seq
	api.seq++
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return sse.WriteEvent(ev.Type, b)
}

// at is a pointer to an index, for the event members that may be 0.
func at(i int) *int { return &i }

// responsesStreamed relays the engine's stream as Responses events: the
// response created, its message item and text part opened with the first
// text, a delta per chunk of text, then the items closed and the response completed with the
// usage it is billed. A failure mid-stream ends it with response.failed,
// which carries the usage billed for what was relayed.
func (r *relay) responsesStreamed(api *responsesAPI) Outcome {
	r.begin()
	if api.events(r.sse,
		openai.ResponseEvent{Type: evCreated, Response: api.response(statusInProgress, nil, nil)},
		openai.ResponseEvent{Type: evInProgress, Response: api.response(statusInProgress, nil, nil)}) != nil {
		r.out.State = ClientGone
		return r.out
	}
	r.flush()
	for r.wait(); r.responsesStep(api); r.wait() {
	}
	return r.out
}

// open opens the message item and its text part, once: with the answer's
// first text, or at its end when it has neither text nor tool calls.
func (api *responsesAPI) open(sse *openai.SSEWriter) error {
	if api.opened {
		return nil
	}
	api.opened = true
	return api.events(sse,
		openai.ResponseEvent{Type: evItemAdded, OutputIndex: at(0), Item: ptr(api.message(statusInProgress, ""))},
		openai.ResponseEvent{Type: evPartAdded, ItemID: api.ident.msgID, OutputIndex: at(0), ContentIndex: at(0), Part: ptr(openai.NewOutputText(""))})
}

// events writes evs in order, up to the first that fails.
func (api *responsesAPI) events(sse *openai.SSEWriter, evs ...openai.ResponseEvent) error {
	for _, ev := range evs {
		if err := api.event(sse, ev); err != nil {
			return err
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// responsesStep relays the next event; it reports false once the stream
// ended.
func (r *relay) responsesStep(api *responsesAPI) bool {
	ev, err := r.next()
	switch {
	case errors.Is(err, io.EOF):
		r.ending()
		api.complete(r)
		return false
	case errors.Is(err, errOverReservation):
		r.out.State = Broken
		r.ending()
		api.fail(r, "reservation_exceeded", "the engine went past the output this request reserved; the answer is cut here")
		return false
	case err != nil:
		if r.c.Request.Context().Err() != nil {
			r.out.State = ClientGone
			return false
		}
		r.out.State = Broken
		r.ending()
		e := brokenEvent(context.Cause(r.ctx)).Error
		api.fail(r, codeOf(e), e.Message)
		return false
	case ev.Err != nil:
		r.out.State = Broken
		r.ending()
		api.fail(r, "engine_failed", "the engine failed mid-stream")
		return false
	case ev.Usage != nil:
		if r.unflushed {
			r.flush() // what was held, before waiting for the next event
		}
		return true
	}
	api.ans.add(ev.Data)
	if text := api.ans.content.String(); len(text) > api.sent {
		delta := text[api.sent:]
		api.sent = len(text)
		if api.open(r.sse) != nil || api.event(r.sse, openai.ResponseEvent{Type: evTextDelta, ItemID: api.ident.msgID, OutputIndex: at(0), ContentIndex: at(0),
			Delta: &delta, Logprobs: json.RawMessage(emptyLogprobsJSON)}) != nil {
			r.out.State = ClientGone
			return false
		}
	}
	r.flush()
	return true
}

// codeOf is an error's code as a string.
func codeOf(e openai.Error) string {
	var code string
	if json.Unmarshal(e.Code, &code) != nil {
		return "engine_failed"
	}
	return code
}

// complete closes the message's part and item, adds the function calls
// and completes the response (incomplete when the engine stopped at the
// output cap) with its bill. It is written and not flushed: it leaves
// with the response's own end (see step).
func (api *responsesAPI) complete(r *relay) {
	text := api.ans.content.String()
	status := api.status()
	var events []openai.ResponseEvent
	if api.hasMessage() {
		if api.open(r.sse) != nil {
			return
		}
		part := openai.NewOutputText(text)
		events = append(events,
			openai.ResponseEvent{Type: evTextDone, ItemID: api.ident.msgID, OutputIndex: at(0), ContentIndex: at(0), Text: &text,
				Logprobs: json.RawMessage(emptyLogprobsJSON)},
			openai.ResponseEvent{Type: evPartDone, ItemID: api.ident.msgID, OutputIndex: at(0), ContentIndex: at(0), Part: &part})
	}
	items := api.output(status)
	for i := range items {
		it := &items[i]
		if it.Type == itemFunctionCall {
			args := it.Arguments
			events = append(events,
				openai.ResponseEvent{Type: evItemAdded, OutputIndex: at(i), Item: it},
				openai.ResponseEvent{Type: evArgumentsDone, ItemID: it.ID, OutputIndex: at(i), Arguments: &args})
		}
		events = append(events, openai.ResponseEvent{Type: evItemDone, OutputIndex: at(i), Item: it})
	}
	final := evCompleted
	if status == statusIncomplete {
		final = evIncomplete
	}
	events = append(events, openai.ResponseEvent{Type: final, Response: api.response(status, items, r.billed())})
	_ = api.events(r.sse, events...)
}

// fail ends a stream with response.failed: the output so far, the usage
// billed for it, the error.
func (api *responsesAPI) fail(r *relay, code, msg string) {
	resp := api.response(openai.ResponseFailed, api.output(statusIncomplete), r.billed())
	resp.IncompleteDetails = nil
	resp.Error = &openai.ResponseError{Code: code, Message: msg}
	_ = api.event(r.sse, openai.ResponseEvent{Type: evFailed, Response: resp})
}

// responsesBuffered builds a non-streamed response object from the
// engine's stream, with the usage it is billed.
func (r *relay) responsesBuffered(api *responsesAPI) Outcome {
	for {
		ev, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if r.failBuffered(ev, err) {
			return r.out
		}
		if ev.Usage != nil {
			continue // the answer's usage is what it is billed, below
		}
		api.ans.add(ev.Data)
	}
	status := api.status()
	r.c.JSON(http.StatusOK, api.response(status, api.output(status), r.billed()))
	return r.out
}
