package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/llmplat/llmplat/runtime/agentflags"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

func init() {
	register("nodeagent", "run the dial-out node agent beside an engine", runNodeAgent)
}

// nodeTokenEnv holds the node's token: a flag would show it in the
// process list.
const nodeTokenEnv = "LLMPLAT_NODE_TOKEN"

// agentModels collects repeated -model values; agentflags.Parse reads
// them, as the Terraform provider does for the command it emits.
type agentModels []string

func (m *agentModels) String() string { return strings.Join(*m, " ") }

func (m *agentModels) Set(v string) error {
	*m = append(*m, v)
	return nil
}

// modelHelp explains -model's fields.
const modelHelp = `a model the engine serves (repeatable, at least one), as comma-separated key=value pairs, all required:
  name=          the platform's model name, as declared in the admin API (llama-8b)
  served=        the name the engine answers to (vLLM's --served-model-name); the node's
                 requests carry this one, whatever the admin API's served_name says
  max-num-seqs=  the engine's --max-num-seqs: streams it runs at once
  max-model-len= the engine's --max-model-len: the longest context, prompt plus answer
  kv-tokens=     tokens of KV cache the engine holds (vLLM logs "GPU KV cache size: N tokens";
                 llmplat plan prints it as "KV capacity"): routing weighs a request against it
example: name=llama-8b,served=meta-llama/Llama-3.1-8B-Instruct,max-num-seqs=64,max-model-len=8192,kv-tokens=185000`

func runNodeAgent(ctx context.Context, args []string, _ io.Writer) error {
	fs := newFlagSet("nodeagent", envNodeToken)
	var cfg nodeagent.Config
	var models agentModels
	fs.StringVar(&cfg.ServerURL, "server", "", "orchestrator socket, ws:// or wss://…/v1/nodes/connect")
	fs.StringVar(&cfg.NodeID, "node-id", "", "this node's id")
	fs.StringVar(&cfg.EngineURL, "engine", nodeagent.DefaultEngineURL, "engine base URL, without /v1")
	fs.Var(&models, "model", modelHelp)
	fs.StringVar(&cfg.CompletionLog, "completion-log", "", "file to append one JSON line per finished request to (counts only, never prompts); empty for none")
	drainTimeout := fs.Duration("drain-timeout", defaultDrainTimeout,
		"on SIGTERM or SIGINT, how long in-flight requests may run while the node drains (no new work) before they are cancelled; match the pod's terminationGracePeriodSeconds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	cfg.Token = nodeproto.Secret(os.Getenv(nodeTokenEnv))
	if cfg.Token == "" {
		return errors.New(nodeTokenEnv + " is not set")
	}
	parsed, err := agentflags.Parse(agentflags.Command{Server: cfg.ServerURL, NodeID: cfg.NodeID, Models: models})
	if err != nil {
		return err
	}
	cfg.Models = parsed
	cfg.Logger = newLogger(os.Stderr)
	a, err := nodeagent.New(cfg)
	if err != nil {
		return err
	}
	return runDraining(ctx, a, *drainTimeout)
}

// defaultDrainTimeout is Kubernetes' usual grace for a GPU pod less a
// margin: answers of a few thousand tokens finish well within it.
const defaultDrainTimeout = 5 * time.Minute

// drainMargin is the time after the drain timeout for the last done
// records and the close.
const drainMargin = 10 * time.Second

// runDraining runs the agent until ctx ends (the process got SIGTERM or
// SIGINT), then drains the node instead of dropping its streams: the
// server stops routing to it at once, in-flight requests finish or are
// cancelled at the timeout, and the agent returns once drained.
func runDraining(ctx context.Context, a *nodeagent.Agent, timeout time.Duration) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	a.Drain(timeout)
	t := time.NewTimer(timeout + drainMargin)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		cancel()
		return <-done
	}
}
