package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	cfg.Logger = newLogger(os.Stderr)
	a, err := nodeagent.New(cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
