package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	oa "github.com/llmplat/llmplat/runtime/openai"
)

// TestLookAlikeKeysRefused: a body with a duplicate key, or a key that
// encoding/json would fold onto a known one (the Kelvin sign in
// max_tokens, the long s in messages), is refused with a 400 naming the
// parameter, before anything is reserved; an engine behind the platform
// reads keys exactly and would have read another request.
func TestLookAlikeKeysRefused(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct{ name, body, code, param string }{
		{"kelvin max_tokens beside the real one", `{"model":"llama-8b","max_tokens":1,"max_to` + "\u212a" + `ens":8000,` + msgs + `}`, "duplicate_key", "max_tokens"},
		{"kelvin max_tokens alone", `{"model":"llama-8b","max_to` + "\u212a" + `ens":8000,` + msgs + `}`, "variant_key", "max_tokens"},
		{"long-s messages", `{"model":"llama-8b","me` + "\u017f\u017f" + `ages":[{"role":"user","content":"x"}],` + msgs + `}`, "variant_key", "messages"},
		{"duplicate max_tokens", `{"model":"llama-8b","max_tokens":1,"max_tokens":8000,` + msgs + `}`, "duplicate_key", "max_tokens"},
		{"upper-case model", `{"MODEL":"llama-8b",` + msgs + `}`, "variant_key", "model"},
		{"nested role variant", `{"model":"llama-8b","messages":[{"ROLE":"user","content":"hi"}]}`, "variant_key", "messages[0].role"},
		{"nested content duplicate", `{"model":"llama-8b","messages":[{"role":"user","content":"a","content":"b"}]}`, "duplicate_key", "messages[0].content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := s.do(key, tt.body)
			checkError(t, resp, body, errorCase{tt.name, 400, oa.TypeInvalidRequest, tt.code, false})
			var e oa.ErrorBody
			_ = json.Unmarshal([]byte(body), &e)
			if e.Error.Param == nil || *e.Error.Param != tt.param {
				t.Errorf("param = %v, want %q", e.Error.Param, tt.param)
			}
			if _, err := s.ledgerRow(resp.Header.Get("X-Request-Id")); err == nil {
				t.Error("a refused body reserved a ledger row")
			}
		})
	}
	if st := s.sims["llama-8b"].Stats(); st.Finished+st.Aborted+int64(st.Running) != 0 {
		t.Errorf("the engine saw a refused request: %+v", st)
	}
}

// TestUnknownFieldsBounded: fields the API does not define are forwarded,
// within a bound; megabytes of them are refused instead of being held for
// a stream's life.
func TestUnknownFieldsBounded(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	big := strings.Repeat("x", gateway.MaxExtraBytes)
	resp, body := s.do(key, `{"model":"llama-8b","max_tokens":3,"padding":"`+big+`","messages":[{"role":"user","content":"hi"}]}`)
	checkError(t, resp, body, errorCase{"big extra", 400, oa.TypeInvalidRequest, "unknown_fields_too_large", false})
	if !strings.Contains(body, `"param":"padding"`) {
		t.Errorf("the refusal does not name the field: %s", body)
	}
	resp, body = s.do(key, `{"model":"llama-8b","max_tokens":3,"top_k":5,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a small vLLM extension was refused: %d %s", resp.StatusCode, body)
	}
}

// overrunEngine streams 60 tokens whatever max_tokens says, with the
// running usage on every chunk, as an engine that ignores the cap would.
func overrunEngine() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(d string) {
			fmt.Fprintf(w, "data: %s\n\n", d)
			http.NewResponseController(w).Flush()
		}
		for i := 1; i <= 60; i++ {
			if r.Context().Err() != nil {
				return
			}
			chunk(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"content":"w%d "}}],"usage":{"prompt_tokens":9,"completion_tokens":%d,"total_tokens":%d}}`, i, i, 9+i))
		}
		chunk(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":60,"total_tokens":69}}`)
		chunk(`[DONE]`)
	})
}

// TestRelayCutsAtTheReservation: an engine that goes past the reserved
// output (it ignores max_tokens) is cut there: the client gets an error
// event and [DONE] right after the reserved output, the row settles at
// what the reservation allows (ledger.BoundUsage) — the engine's prompt
// and the reserved output, not the token past it the client never got —
// and the case is counted and logged.
func TestRelayCutsAtTheReservation(t *testing.T) {
	s := newStack(t, stackOpts{engine: overrunEngine()})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	for _, streamed := range []bool{true, false} {
		resp, err := s.post(context.Background(), s.url, key, chatBody("llama-8b", streamed, 5))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		if streamed {
			if resp.StatusCode != 200 || !strings.Contains(body, `"code":"reservation_exceeded"`) || !strings.Contains(body, "[DONE]") {
				t.Fatalf("streamed: %d %s, want the cut's error event and [DONE]", resp.StatusCode, body)
			}
			if n := strings.Count(body, `"content":"w`); n > 5 {
				t.Errorf("%d content chunks reached the client, want at most the 5 reserved", n)
			}
		} else if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "reservation_exceeded") {
			t.Fatalf("non-streamed: %d %s, want 502 reservation_exceeded", resp.StatusCode, body)
		}
		r := s.waitRow(resp.Header.Get("X-Request-Id"))
		if r.status != "settled" || r.from != "partial" || r.completion != 5 || r.prompt != 9 {
			t.Errorf("streamed %v: row %+v, want settled partial at the engine's 9 prompt and the 5 reserved", streamed, r)
		}
	}
	if !strings.Contains(s.logs.String(), "engine went past the reservation") {
		t.Error("the cut was not logged")
	}
}
