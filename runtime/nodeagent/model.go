package nodeagent

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// ParseModel reads a served model from a command-line value of
// comma-separated key=value pairs: name, served, max-num-seqs,
// max-model-len and kv-tokens, all required, as in
// "name=llama-8b,served=meta-llama/Llama-3.1-8B-Instruct,max-num-seqs=64,max-model-len=8192,kv-tokens=185000".
func ParseModel(s string) (nodeproto.Model, error) {
	var m nodeproto.Model
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || v == "" || seen[k] {
			return m, fmt.Errorf("%w: model %q: want key=value pairs, each once", ErrConfig, s)
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
			return m, fmt.Errorf("%w: model %q: unknown key %q", ErrConfig, s, k)
		}
		if err != nil {
			return m, fmt.Errorf("%w: model %q: %s: %w", ErrConfig, s, k, err)
		}
	}
	if len(seen) != 5 || m.MaxNumSeqs <= 0 || m.MaxModelLen <= 0 || m.KVCapacityTokens <= 0 {
		return m, fmt.Errorf("%w: model %q: needs name, served and positive max-num-seqs, max-model-len, kv-tokens", ErrConfig, s)
	}
	return m, nil
}
