package agentflags

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// ErrInvalid means a command-line value the agent refuses.
var ErrInvalid = errors.New("invalid node agent flag")

// Command is the node agent's command line as given.
type Command struct {
	// Server is -server, the orchestrators' node socket.
	Server string
	// NodeID is -node-id.
	NodeID string
	// Models are the -model values, one per served model.
	Models []string
}

// FlagError is a refusal of one flag; it wraps ErrInvalid.
type FlagError struct {
	// Flag is the flag at fault: "server", "node-id" or "model".
	Flag string
	// Index is the -model value at fault, counted from 0; -1 when the
	// refusal is of all of them or of another flag.
	Index int
	// Err says why.
	Err error
}

func (e *FlagError) Error() string { return "-" + e.Flag + ": " + e.Err.Error() }

func (e *FlagError) Unwrap() error { return e.Err }

// Parse checks c as the agent does when it starts, and returns the served
// models. A refusal is a *FlagError.
func Parse(c Command) ([]nodeproto.Model, error) {
	if err := CheckServerURL(c.Server); err != nil {
		return nil, &FlagError{Flag: "server", Index: -1, Err: err}
	}
	if !nodeproto.ValidID(c.NodeID) {
		return nil, &FlagError{Flag: "node-id", Index: -1, Err: fmt.Errorf("%w: node id %q must be 1 to %d letters, digits, '.', '_' or '-'",
			ErrInvalid, c.NodeID, nodeproto.MaxIDLen)}
	}
	if len(c.Models) == 0 {
		return nil, &FlagError{Flag: "model", Index: -1,
			Err: fmt.Errorf("%w: at least one model is required: a node that serves nothing is never routed to", ErrInvalid)}
	}
	models := make([]nodeproto.Model, 0, len(c.Models))
	seen := make(map[string]bool, len(c.Models))
	for i, s := range c.Models {
		m, err := ParseModel(s)
		if err != nil {
			return nil, &FlagError{Flag: "model", Index: i, Err: err}
		}
		if seen[m.Name] {
			return nil, &FlagError{Flag: "model", Index: i, Err: fmt.Errorf("%w: model %q is given twice", ErrInvalid, m.Name)}
		}
		seen[m.Name] = true
		models = append(models, m)
	}
	return models, nil
}

// CheckServerURL checks -server: a ws:// or wss:// URL with a host.
func CheckServerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return fmt.Errorf("%w: server URL %q must be ws:// or wss:// with a host (wss://host/v1/nodes/connect)", ErrInvalid, s)
	}
	return nil
}

// modelKeys are a -model value's keys, all required, in FormatModel's order.
var modelKeys = []string{"name", "served", "max-num-seqs", "max-model-len", "kv-tokens"}

// ParseModel reads a served model from a -model value of comma-separated
// key=value pairs: name, served, max-num-seqs, max-model-len and
// kv-tokens, all required, as in
// "name=llama-8b,served=meta-llama/Llama-3.1-8B-Instruct,max-num-seqs=64,max-model-len=8192,kv-tokens=185000".
func ParseModel(s string) (nodeproto.Model, error) {
	var m nodeproto.Model
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || v == "" || seen[k] {
			return m, fmt.Errorf("%w: model %q: want key=value pairs, each once (a value cannot hold ',' or be empty)", ErrInvalid, s)
		}
		seen[k] = true
		var err error
		switch k {
		case "name":
			m.Name = v
		case "served":
			m.ServedName = v
		case "max-num-seqs":
			m.MaxNumSeqs, err = strconv.Atoi(v)
		case "max-model-len":
			m.MaxModelLen, err = strconv.Atoi(v)
		case "kv-tokens":
			m.KVCapacityTokens, err = strconv.ParseInt(v, 10, 64)
		default:
			return m, fmt.Errorf("%w: model %q: unknown key %q", ErrInvalid, s, k)
		}
		if err != nil {
			return m, fmt.Errorf("%w: model %q: %s: %w", ErrInvalid, s, k, err)
		}
	}
	if len(seen) != len(modelKeys) || m.MaxNumSeqs <= 0 || m.MaxModelLen <= 0 || m.KVCapacityTokens <= 0 {
		return m, fmt.Errorf("%w: model %q: needs name, served and positive max-num-seqs, max-model-len, kv-tokens", ErrInvalid, s)
	}
	return m, nil
}

// FormatModel writes m as a -model value; ParseModel reads it back when
// the agent takes m.
func FormatModel(m nodeproto.Model) string {
	return fmt.Sprintf("name=%s,served=%s,max-num-seqs=%d,max-model-len=%d,kv-tokens=%d",
		m.Name, m.ServedName, m.MaxNumSeqs, m.MaxModelLen, m.KVCapacityTokens)
}
