package engineclient_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/llmplat/llmplat/runtime/dispatch"
	. "github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/internalhop"
	"github.com/llmplat/llmplat/runtime/openai"
)

// The internal hop between gateway and orchestrator carries what this
// package read of an engine's events: these tests run the engine client
// behind it and check the gateway gets exactly what it would get in
// process.

const testToken = "internal-secret"

// remoteOver serves d on the internal endpoint and returns a Remote client
// of it.
func remoteOver(t *testing.T, d dispatch.Dispatcher) *internalhop.Remote {
	t.Helper()
	srv := httptest.NewServer(internalhop.NewRemoteHandler(d, testToken, nil))
	t.Cleanup(srv.Close)
	return internalhop.NewRemote(srv.URL+"/", testToken, srv.Client())
}

// TestRemoteRelaysEventsUnchanged compares a job run through the internal
// endpoint with the same job run directly: the events, their token counts
// and the usage must be identical, and the engine sees the same body.
func TestRemoteRelaysEventsUnchanged(t *testing.T) {
	var viaRemote, direct openai.ChatCompletionRequest
	srvRemote := GoldenEngine(t, "stream_include_usage.golden", &viaRemote)
	srvDirect := GoldenEngine(t, "stream_include_usage.golden", &direct)
	targets := func(url string) map[string][]Target {
		return map[string][]Target{"llama-8b": {{URL: url, ServedName: "meta-llama/Llama-3.1-8B-Instruct"}}}
	}
	r := remoteOver(t, NewDirect(targets(srvRemote.URL), nil))

	want := run(t, NewDirect(targets(srvDirect.URL), nil))
	got := run(t, r)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("remote events differ from direct ones:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(viaRemote, direct) {
		t.Errorf("engine body via remote = %+v, direct = %+v", viaRemote, direct)
	}
	var usage *openai.Usage
	for _, ev := range got {
		if ev.Usage != nil {
			usage = ev.Usage
		}
	}
	if usage == nil || usage.CompletionTokens == 0 {
		t.Errorf("usage = %+v, want the engine's usage", usage)
	}
}

func run(t *testing.T, d dispatch.Dispatcher) []dispatch.Event {
	t.Helper()
	s, err := d.Dispatch(t.Context(), Job("llama-8b", false))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	events, end := Drain(t, s)
	if !errors.Is(end, io.EOF) {
		t.Fatalf("end = %v, want io.EOF", end)
	}
	return events
}

// TestRemoteBrokenStream: a stream that breaks behind the orchestrator
// reaches the gateway broken, never as a clean end.
func TestRemoteBrokenStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
	}))
	defer srv.Close()
	r := remoteOver(t, NewDirect(map[string][]Target{"m": {{URL: srv.URL, ServedName: "m"}}}, nil))
	s, err := r.Dispatch(t.Context(), Job("m", true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	events, end := Drain(t, s)
	if len(events) != 1 || events[0].Tokens != 1 {
		t.Errorf("events = %+v, want 1 content event", events)
	}
	if !errors.Is(end, dispatch.ErrStreamBroken) {
		t.Errorf("end = %v, want dispatch.ErrStreamBroken", end)
	}
}

// TestRemoteCancelAbortsEngine: the gateway ending its context aborts the
// request on the engine behind the orchestrator.
func TestRemoteCancelAbortsEngine(t *testing.T) {
	srv, aborted := HangingEngine(t)
	r := remoteOver(t, NewDirect(map[string][]Target{"m": {{URL: srv.URL, ServedName: "m"}}}, nil))
	CheckCancelAborts(t, r, aborted)
}
