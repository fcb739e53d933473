package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderCommand: `llmplat render -f examples/platform.yaml -o dir`
// writes every manifest; without -o the same manifests go to stdout; a
// description with a mistake is refused naming the field.
func TestRenderCommand(t *testing.T) {
	example := filepath.Join("..", "..", "..", "examples", "platform.yaml")
	dir := t.TempDir()
	var out bytes.Buffer
	if err := runRender(t.Context(), []string{"-f", example, "-o", dir}, &out); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 7 {
		t.Fatalf("%d files (%v), want 7", len(entries), err)
	}
	out.Reset()
	if err := runRender(t.Context(), []string{"-f", example}, &out); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "kind: ScaledObject"); n != 3 {
		t.Errorf("%d ScaledObjects on stdout, want 3", n)
	}
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, bytes.Replace(data, []byte("gpu: L40S, tensor_parallel_size: 2"), []byte("gpu: H900, tensor_parallel_size: 2"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := runRender(t.Context(), []string{"-f", bad}, &out); err == nil || !strings.Contains(err.Error(), "plan.workloads[1].gpu") {
		t.Errorf("render of an unknown GPU = %v, want an error naming plan.workloads[1].gpu", err)
	}
}
