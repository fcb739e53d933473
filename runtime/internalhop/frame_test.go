package internalhop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// events are one of each kind the orchestrator reads, with every field
// the typed tail carries.
var events = []dispatch.Event{
	{Data: []byte(`{"model":"sim","choices":[{"delta":{"role":"assistant"}}]}`), ModelValue: dispatch.Span{From: 9, To: 14}},
	{Data: []byte(`{"model":"sim","choices":[{"delta":{"content":"hi there"}}],"usage":{"prompt_tokens":5}}`),
		Tokens: 1, Text: tokens.Text{Bytes: 8, Words: 2, Inner: 1, Tokens: 2}, Calls: 1,
		Progress:   &openai.Usage{PromptTokens: 5, CompletionTokens: 1, TotalTokens: 6},
		ModelValue: dispatch.Span{From: 9, To: 14}, UsageValue: dispatch.Span{From: 68, To: 87}, UsageMember: dispatch.Span{From: 59, To: 87}},
	{Data: []byte(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":-2,"total_tokens":3}}`),
		Usage:      &openai.Usage{PromptTokens: 5, CompletionTokens: -2, TotalTokens: 3},
		UsageValue: dispatch.Span{From: 22, To: 81}, UsageMember: dispatch.Span{From: 13, To: 81}},
	{Data: []byte(`{"error":{"message":"boom","type":"server_error","code":500}}`),
		Err: &openai.Error{Message: "boom", Type: "server_error", Code: []byte("500")}},
	{Data: []byte(`{"a":1,"a":2}`), Duplicate: true},
	{Data: []byte(`not json`)},
}

// TestRecordsCarryTheEventTyped: what the gateway reads off the hop is the
// event the orchestrator parsed, field for field, without reading its
// bytes; then the end.
func TestRecordsCarryTheEventTyped(t *testing.T) {
	var b []byte
	for i := range events {
		if !events[i].SpansFit() {
			t.Fatalf("event %d: test spans do not fit", i)
		}
		b = appendEvent(b, &events[i])
	}
	b = append(b, tagDone)
	rr := recordReader{r: bufio.NewReader(bytes.NewReader(b))}
	for i, want := range events {
		var got dispatch.Event
		done, err := rr.next(&got)
		if err != nil || done {
			t.Fatalf("event %d: done %v, err %v", i, done, err)
		}
		got.Data = bytes.Clone(got.Data)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
	var ev dispatch.Event
	if done, err := rr.next(&ev); !done || err != nil {
		t.Errorf("end: done %v, err %v", done, err)
	}
}

// TestRecordsRefuseWhatDoesNotFit: a record cut short, a span outside its
// event, an unknown flag or an event past the bound breaks the stream;
// nothing of it reaches the relay.
func TestRecordsRefuseWhatDoesNotFit(t *testing.T) {
	whole := appendEvent(nil, &events[1])
	outside := events[1]
	outside.UsageValue.To = len(outside.Data) + 1
	tests := map[string][]byte{
		"cut short":     whole[:len(whole)-3],
		"span outside":  appendEvent(nil, &outside),
		"unknown flag":  {tagEvent, 0x40},
		"unknown tag":   {'x'},
		"event too big": append([]byte{tagEvent, 0, 0, 0, 0, 0, 0, 0}, 0x81, 0x80, 0x80, 0x04),
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			rr := recordReader{r: bufio.NewReader(bytes.NewReader(b))}
			var ev dispatch.Event
			done, err := rr.next(&ev)
			if done || err == nil {
				t.Fatalf("done %v, err %v: want a refusal", done, err)
			}
		})
	}
}

// FuzzRecordReader: whatever bytes come, the reader answers an event whose
// spans fit it, the end, or an error; it never panics nor allocates past
// its bound.
func FuzzRecordReader(f *testing.F) {
	for i := range events {
		f.Add(appendEvent(nil, &events[i]))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rr := recordReader{r: bufio.NewReader(bytes.NewReader(b))}
		for {
			var ev dispatch.Event
			done, err := rr.next(&ev)
			if done || err != nil {
				return
			}
			if !ev.SpansFit() {
				t.Fatalf("spans do not fit: %+v", ev)
			}
			_ = ev.Rewrite([]byte(`"m"`), []byte(`{}`), false)
			_ = ev.Rewrite(nil, nil, true)
		}
	})
}

// TestJobArrivesWhole: the orchestrator's dispatcher gets the job the
// gateway made — its estimate, its cap, its engine body — without
// decoding it again.
func TestJobArrivesWhole(t *testing.T) {
	var got *dispatch.Job
	r, _ := remoteOver(t, dispatcherFunc(func(_ context.Context, j *dispatch.Job) (dispatch.Stream, error) {
		got = j
		return nil, dispatch.ErrNoCapacity
	}))
	want := job("llama-8b", true)
	want.PromptEstimate, want.MaxOutput = 123, 456
	if _, err := r.Dispatch(t.Context(), want); !errors.Is(err, dispatch.ErrNoCapacity) {
		t.Fatalf("err = %v", err)
	}
	if got == nil {
		t.Fatal("the job did not arrive")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("job arrived as %+v, want %+v", got, want)
	}
}

// TestHopStreamEnds: a stream whose records end without the end record
// is broken, and one with it ends cleanly.
func TestHopStreamEnds(t *testing.T) {
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"whole":  {append(appendEvent(nil, &events[0]), tagDone), io.EOF},
		"broken": {appendEvent(nil, &events[0]), dispatch.ErrStreamBroken},
	} {
		t.Run(name, func(t *testing.T) {
			s := &hopStream{body: io.NopCloser(bytes.NewReader(tc.b)), cancel: func() {},
				rr: recordReader{r: bufio.NewReader(bytes.NewReader(tc.b))}}
			defer s.Close()
			if _, err := s.Recv(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); !errors.Is(err, tc.want) {
				t.Errorf("end = %v, want %v", err, tc.want)
			}
		})
	}
}
