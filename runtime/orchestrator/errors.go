package orchestrator

import (
	"errors"

	"github.com/llmplat/llmplat/runtime/admin"
)

// errorsIsNodeClosed reports whether a connection ended because the node
// closed it.
func errorsIsNodeClosed(err error) bool { return errors.Is(err, errNodeClosed) }

// isInvalidToken reports whether a verification error is the token's
// fault, not the store's.
func isInvalidToken(err error) bool { return errors.Is(err, admin.ErrInvalidNodeToken) }
