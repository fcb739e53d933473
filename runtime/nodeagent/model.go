package nodeagent

import (
	"fmt"

	"github.com/llmplat/llmplat/runtime/agentflags"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// ParseModel reads a served model from a -model value with
// agentflags.ParseModel; a refusal wraps ErrConfig.
func ParseModel(s string) (nodeproto.Model, error) {
	m, err := agentflags.ParseModel(s)
	if err != nil {
		return m, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return m, nil
}
