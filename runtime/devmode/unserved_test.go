package devmode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// unservedAsk bounds one request while the test waits for the drained
// model's answer: until the orchestrator first publishes a model at zero
// (15 s after its start), a request queues for the 30 s queue limit
// instead, and the test asks again rather than wait that out.
const unservedAsk = 5 * time.Second

// TestLocalModeSaysWhyADrainedModelIsUnserved: after the admin API drains
// the local node of a model, nothing in the local mode starts another, so
// its callers are told so at once: 503 no_healthy_node in the OpenAI
// error shape naming the drained node and what brings it back, with no
// Retry-After and no promise of a load from zero.
func TestLocalModeSaysWhyADrainedModelIsUnserved(t *testing.T) {
	r := startDevOn(t, "")
	ctx := t.Context()
	adm := adminClient(t, r)
	if _, err := adm.DrainNode(ctx, "local-llama-8b"); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNil(t, readyTimeout, "local-llama-8b to be drained", func() error {
		n, err := adm.GetNode(ctx, "local-llama-8b")
		if err == nil && n.State != "drained" {
			err = fmt.Errorf("state %s", n.State)
		}
		return err
	})

	client := &http.Client{Timeout: unservedAsk}
	defer client.CloseIdleConnections()
	var (
		resp *http.Response
		got  openai.ErrorBody
	)
	// Asked until the gateway answers at once: not queued, as a model's
	// callers are until the orchestrator publishes it at zero.
	testenv.EventuallyNil(t, devStartWait, "the drained model's callers to be answered at once", func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.baseURL+"/chat/completions",
			strings.NewReader(`{"model":"llama-8b","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+r.key)
		req.Header.Set("Content-Type", "application/json")
		if resp, err = client.Do(req); err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		got = openai.ErrorBody{}
		if err := dec.Decode(&got); err != nil {
			return fmt.Errorf("status %d, body %s: %w", resp.StatusCode, body, err)
		}
		if string(got.Error.Code) == `"no_capacity"` {
			return fmt.Errorf("queued: status %d, body %s", resp.StatusCode, body)
		}
		return nil
	})
	if string(got.Error.Code) != `"no_healthy_node"` {
		t.Fatalf("status %d, code %s, message %q; want no_healthy_node", resp.StatusCode, got.Error.Code, got.Error.Message)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || got.Error.Type != openai.TypeUnavailable {
		t.Errorf("status %d, type %s; want 503 %s", resp.StatusCode, got.Error.Type, openai.TypeUnavailable)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After: %s; want none: nothing will start a node", ra)
	}
	msg := got.Error.Message
	for _, want := range []string{`no node serves the model "llama-8b"`, "local-llama-8b is drained", "restart llmplat dev", "Adding a node by hand"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "zero replicas") || strings.Contains(msg, "Retry-After") {
		t.Errorf("message %q promises a wake", msg)
	}
}
