package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestConfigMistakesAreRefused: a gateway or orchestrator started with a
// mistake found in the field says what is wrong at start-up instead of
// failing every request later.
func TestConfigMistakesAreRefused(t *testing.T) {
	const admin = "adm-0123456789abcdef0123456789abcdef"
	const internal = "internal-0123456789abcdef0123456789"
	tests := []struct {
		name      string
		run       func(context.Context, []string, io.Writer) error
		args      []string
		env       map[string]string
		wantInErr string
	}{
		{"orchestrator URL with the dispatch path", runGateway,
			[]string{"-orchestrator", "http://orch:8091/internal/v1/dispatch"},
			map[string]string{"LLMPLAT_ADMIN_TOKEN": admin, internalTokenEnv: internal}, "without a path"},
		{"orchestrator URL without a scheme", runGateway,
			[]string{"-orchestrator", "orch:8091"},
			map[string]string{"LLMPLAT_ADMIN_TOKEN": admin, internalTokenEnv: internal}, "want http:// or https://"},
		{"no admin credential", runGateway,
			[]string{"-orchestrator", "http://orch:8091"},
			map[string]string{"LLMPLAT_ADMIN_TOKEN": "", internalTokenEnv: internal}, "LLMPLAT_ADMIN_TOKEN"},
		{"short internal token at the gateway", runGateway,
			[]string{"-orchestrator", "http://orch:8091"},
			map[string]string{"LLMPLAT_ADMIN_TOKEN": admin, internalTokenEnv: "short"}, "at least 32 characters"},
		{"short internal token at the orchestrator", runOrchestrator,
			nil, map[string]string{internalTokenEnv: "short"}, "at least 32 characters"},
		{"node agent without its token", runNodeAgent,
			[]string{"-server", "ws://orch:8090/v1/nodes/connect", "-node-id", "n1"},
			map[string]string{nodeTokenEnv: ""}, nodeTokenEnv},
		{"node agent without a model", runNodeAgent,
			[]string{"-server", "ws://orch:8090/v1/nodes/connect", "-node-id", "n1"},
			map[string]string{nodeTokenEnv: "tok"}, "at least one model is required"},
		{"node agent with a comma in a served name", runNodeAgent,
			[]string{"-server", "ws://orch:8090/v1/nodes/connect", "-node-id", "n1",
				"-model", "name=a,served=a,b=c,max-num-seqs=1,max-model-len=2,kv-tokens=3"},
			map[string]string{nodeTokenEnv: "tok"}, `unknown key "b"`},
		{"node agent with an http server URL", runNodeAgent,
			[]string{"-server", "http://orch:8090/v1/nodes/connect", "-node-id", "n1",
				"-model", "name=a,served=a,max-num-seqs=1,max-model-len=2,kv-tokens=3"},
			map[string]string{nodeTokenEnv: "tok"}, "must be ws:// or wss://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			err := tt.run(t.Context(), tt.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("err = %v, want one that says %q", err, tt.wantInErr)
			}
		})
	}
}

// TestHelpNamesTheEnvironment: each command's -h lists the environment
// variables it reads, and the node agent's explains -model's fields.
func TestHelpNamesTheEnvironment(t *testing.T) {
	tests := []struct {
		name string
		run  func(context.Context, []string, io.Writer) error
		want []string
	}{
		{"gateway", runGateway, []string{"LLMPLAT_DATABASE_URL", dbSecretEnv, "LLMPLAT_REDIS_URL", "LLMPLAT_ADMIN_TOKEN", internalTokenEnv, "served_name"}},
		{"orchestrator", runOrchestrator, []string{"LLMPLAT_DATABASE_URL", dbSecretEnv, "LLMPLAT_REDIS_URL", internalTokenEnv}},
		{"nodeagent", runNodeAgent, []string{nodeTokenEnv, "kv-tokens=", "max-model-len=", "all required", "whatever the admin API's served_name says"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			help := captureStderr(t, func() { _ = tt.run(t.Context(), []string{"-h"}, io.Discard) })
			for _, w := range tt.want {
				if !strings.Contains(help, w) {
					t.Errorf("help does not mention %q:\n%s", w, help)
				}
			}
		})
	}
}

// captureStderr returns what f writes to os.Stderr, where flag sets print.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	defer func() { os.Stderr = old }()
	got := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, r)
		got <- b.String()
	}()
	f()
	w.Close()
	return <-got
}

// TestLoggerWritesDurationsAsText: "retry_in":"1.5s", not nanoseconds.
func TestLoggerWritesDurationsAsText(t *testing.T) {
	var b bytes.Buffer
	newLogger(&b).Info("node link ended", "retry_in", 1500*time.Millisecond)
	if !strings.Contains(b.String(), `"retry_in":"1.5s"`) {
		t.Errorf("log = %s, want the duration as 1.5s", b.String())
	}
}
