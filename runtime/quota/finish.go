package quota

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Finish is what the end of one request does in Redis.
type Finish struct {
	KeyID     string
	RequestID string
	// Release gives back the request's stream slot (ReleaseStream).
	Release bool
	// Tokens, when positive, are counted on the key's day once per request
	// (CountTokens).
	Tokens int64
	// Model, when set, names the queue whose head is woken (Queue.Notify):
	// the request's engine place is free.
	Model string
}

// Finished reports what Finish did.
type Finished struct {
	// Counted is true when this call counted the tokens; false when they
	// were counted before (or there were none).
	Counted bool
	// Woken is true when a queued request was woken.
	Woken bool
}

// Finish does what the end of f's request needs in one round trip: the
// slot's release and the day's count in one script on the key's slot, the
// queue's wake-up in another on the model's, pipelined. Each part is
// idempotent (the count keeps a per-request marker), so a caller may retry
// the whole after an error, or go on with the parts one by one.
func (l *Limiter) Finish(ctx context.Context, f Finish) (Finished, error) {
	if err := checkName("key id", f.KeyID); err != nil {
		return Finished{}, err
	}
	if err := checkName("request id", f.RequestID); err != nil {
		return Finished{}, err
	}
	if f.Tokens < 0 {
		return Finished{}, fmt.Errorf("quota: negative token count %d", f.Tokens)
	}
	if f.Release {
		if err := l.leases.wait(ctx, f.RequestID); err != nil {
			return Finished{}, fmt.Errorf("finish: %w", err)
		}
	}
	var calls []scriptCall
	if f.Release || f.Tokens > 0 {
		now := l.cfg.Clock.Now()
		ttl := dayStart(now).Add(tokensDayRetention).Sub(now)
		release := "0"
		if f.Release {
			release = "1"
		}
		calls = append(calls, scriptCall{script: finishScript,
			keys: []string{l.keys.Streams(f.KeyID), l.keys.TokensPerDay(f.KeyID, now), l.keys.TokensCounted(f.KeyID, f.RequestID)},
			args: []any{f.RequestID, release, f.Tokens, millis(ttl), millis(countedRetention)}})
	}
	if f.Model != "" {
		if err := checkName("model", f.Model); err != nil {
			return Finished{}, err
		}
		calls = append(calls, scriptCall{script: notifyScript,
			keys: l.keys.notifyKeys(f.Model), args: []any{l.keys.QueueWake(f.Model), millis(missedWakeLife)}})
	}
	if len(calls) == 0 {
		return Finished{}, nil
	}
	cmds, err := l.pipe.run(ctx, calls)
	if err != nil {
		return Finished{}, fmt.Errorf("finish request: %w", err)
	}
	var out Finished
	i := 0
	if f.Release || f.Tokens > 0 {
		n, _ := cmds[i].Int64()
		out.Counted = n == 1
		i++
	}
	if f.Model != "" {
		n, _ := cmds[i].Int64()
		out.Woken = n == 1
	}
	return out, nil
}

// scriptCall is one script run in a pipeline.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// runScripts runs calls in one pipeline by their hashes, and the ones the
// server does not know yet (after a restart, or a new server) again with
// their sources, which also caches them.
func runScripts(ctx context.Context, rdb redis.UniversalClient, calls []scriptCall) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 0 {
		return cmds, nil
	}
	pipe := rdb.Pipeline()
	for i, c := range calls {
		cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	var again []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := rdb.Pipeline()
		for _, i := range again {
			c := calls[i]
			cmds[i] = c.script.Eval(ctx, pipe, c.keys, c.args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	return cmds, cmdErrors(cmds)
}

// cmdErrors joins the errors of cmds.
func cmdErrors(cmds []*redis.Cmd) error {
	var errs []error
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
