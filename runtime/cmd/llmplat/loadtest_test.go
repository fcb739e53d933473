package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/loadgen"
)

// TestLoadtestCommand: llmplat loadtest drives an OpenAI-compatible
// endpoint from OPENAI_BASE_URL, prints a table or, with -json, the
// report; a rate and a burst together are refused.
func TestLoadtestCommand(t *testing.T) {
	_, engine := startEngine(t)
	t.Setenv("OPENAI_BASE_URL", engine.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "unused")
	var out bytes.Buffer
	if err := runLoadtest(context.Background(), []string{"-burst", "30", "-models", "llama-8b", "-max-tokens", "5",
		"-prompt-tokens", "100", "-json", "-quiet"}, &out); err != nil {
		t.Fatal(err)
	}
	var rep loadgen.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not the JSON report: %v\n%s", err, out.String())
	}
	if rep.Overall == nil || rep.Overall.Requests != 30 || rep.Overall.OK != 30 || rep.Overall.CompletionTokens != 150 ||
		rep.Overall.TTFT.P99 <= 0 || rep.WallS <= 0 {
		t.Fatalf("report %+v", rep.Overall)
	}
	out.Reset()
	if err := runLoadtest(context.Background(), []string{"-burst", "4", "-max-tokens", "3", "-quiet"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ttft p50", "llama-8b", "all", "wall time"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if err := runLoadtest(context.Background(), []string{"-burst", "4", "-rate", "5", "-quiet"}, &out); err == nil {
		t.Error("a rate and a burst together were accepted")
	}
}
