package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

func init() {
	register("nodeagent", "run the dial-out node agent beside an engine", runNodeAgent)
}

// nodeTokenEnv holds the node's token: a flag would show it in the
// process list.
const nodeTokenEnv = "LLMPLAT_NODE_TOKEN"

// agentModels collects repeated -model values.
type agentModels []nodeproto.Model

func (m *agentModels) String() string { return fmt.Sprint(*m) }

func (m *agentModels) Set(v string) error {
	model, err := nodeagent.ParseModel(v)
	if err != nil {
		return err
	}
	*m = append(*m, model)
	return nil
}

func runNodeAgent(ctx context.Context, args []string, _ io.Writer) error {
	fs := newFlagSet("nodeagent")
	var cfg nodeagent.Config
	var models agentModels
	fs.StringVar(&cfg.ServerURL, "server", "", "orchestrator socket, ws:// or wss://…/v1/nodes/connect")
	fs.StringVar(&cfg.NodeID, "node-id", "", "this node's id")
	fs.StringVar(&cfg.EngineURL, "engine", nodeagent.DefaultEngineURL, "engine base URL, without /v1")
	fs.Var(&models, "model", "served model (repeatable): name=…,served=…,max-num-seqs=…,max-model-len=…,kv-tokens=…")
	fs.StringVar(&cfg.CompletionLog, "completion-log", "", "file to append one JSON line per finished request to (counts only, never prompts); empty for none")
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
	cfg.Models = models
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	a, err := nodeagent.New(cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
