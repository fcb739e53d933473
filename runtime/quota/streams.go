package quota

import (
	"context"
	"fmt"
)

// ReleaseStream frees requestID's slot. It is idempotent, so the gateway
// may call it on every path, and the ledger sweeper again for orphans.
// Call it with a context that outlives the client's request
// (context.WithoutCancel plus a short timeout): it must run after the
// client has gone.
func (l *Limiter) ReleaseStream(ctx context.Context, keyID, requestID string) error {
	if err := checkName("key id", keyID); err != nil {
		return err
	}
	if err := l.leases.wait(ctx, requestID); err != nil {
		return fmt.Errorf("release stream slot: %w", err)
	}
	if err := l.rdb.ZRem(ctx, l.keys.Streams(keyID), requestID).Err(); err != nil {
		return fmt.Errorf("release stream slot: %w", err)
	}
	return nil
}
