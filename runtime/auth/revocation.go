package auth

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// DefaultResubscribeDelay is the wait between attempts to resubscribe
	// after a Redis error: a restart takes seconds, and until then the
	// cache TTL bounds staleness.
	DefaultResubscribeDelay = time.Second
	// DefaultPingInterval is how long a silent subscription waits before a
	// ping; a half-open connection is noticed within two intervals.
	DefaultPingInterval = 5 * time.Second
)

// The payloads of a revocation message: "id:<api_keys.id>" or
// "hash:<hex sha-256>". A bare decimal is read as an id.
const (
	revokeIDPrefix   = "id:"
	revokeHashPrefix = "hash:"
)

// RevocationChannel is the Redis pub/sub channel that carries key
// revocations between replicas for the given prefix.
func RevocationChannel(prefix string) string { return prefix + "auth:revoked" }

// PublishRevokedKeyID tells every replica's KeyCache on rdb under prefix to
// evict the key with id. The admin API calls it (or KeyCache.RevokeKeyID)
// after the revocation is committed to the store, so that a replica that
// looks the key up again sees it revoked.
func PublishRevokedKeyID(ctx context.Context, rdb redis.UniversalClient, prefix string, id int64) error {
	if err := rdb.Publish(ctx, RevocationChannel(prefix), revokeIDPrefix+strconv.FormatInt(id, 10)).Err(); err != nil {
		return fmt.Errorf("publish key revocation: %w", err)
	}
	return nil
}

// PublishRevokedKeyHash is PublishRevokedKeyID for a key known by its hash.
func PublishRevokedKeyHash(ctx context.Context, rdb redis.UniversalClient, prefix string, hash []byte) error {
	if err := rdb.Publish(ctx, RevocationChannel(prefix), revokeHashPrefix+hex.EncodeToString(hash)).Err(); err != nil {
		return fmt.Errorf("publish key revocation: %w", err)
	}
	return nil
}

// Revoke evicts the key with hash from this cache and publishes the
// revocation to the other replicas. Commit the revocation to the store
// first.
func (c *KeyCache) Revoke(ctx context.Context, hash []byte) error {
	c.evictHash(string(hash))
	if c.cfg.Redis == nil {
		return nil
	}
	return PublishRevokedKeyHash(ctx, c.cfg.Redis, c.cfg.Prefix, hash)
}

// RevokeKeyID is Revoke for a key known by its id.
func (c *KeyCache) RevokeKeyID(ctx context.Context, id int64) error {
	c.evictID(id)
	if c.cfg.Redis == nil {
		return nil
	}
	return PublishRevokedKeyID(ctx, c.cfg.Redis, c.cfg.Prefix, id)
}

// apply evicts what a revocation message names; it reports whether the
// payload was understood.
func (c *KeyCache) apply(payload string) bool {
	switch {
	case strings.HasPrefix(payload, revokeHashPrefix):
		h, err := hex.DecodeString(payload[len(revokeHashPrefix):])
		if err != nil {
			return false
		}
		c.evictHash(string(h))
	default:
		id, err := strconv.ParseInt(strings.TrimPrefix(payload, revokeIDPrefix), 10, 64)
		if err != nil {
			return false
		}
		c.evictID(id)
	}
	return true
}

// Run subscribes to the revocation channel and evicts every key it names,
// until ctx ends; it then returns nil. After a Redis error it resubscribes
// every ResubscribeDelay, and after every successful subscription it
// flushes the whole cache, since messages sent meanwhile were lost. Without
// Redis it only waits for ctx.
func (c *KeyCache) Run(ctx context.Context) error {
	if c.cfg.Redis == nil {
		<-ctx.Done()
		return nil
	}
	for {
		err := c.listen(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.cfg.Logger.Warn("key revocation subscription lost; resubscribing",
			"channel", c.channel, "retry_in", c.cfg.ResubscribeDelay, "err", err)
		t := c.cfg.Clock.NewTimer(c.cfg.ResubscribeDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// errNoPong means the subscription's connection stopped answering pings.
var errNoPong = errors.New("redis did not answer a ping on the subscription")

// listen holds one subscription until it fails or ctx ends.
func (c *KeyCache) listen(ctx context.Context) error {
	ps := c.cfg.Redis.Subscribe(ctx, c.channel)
	defer ps.Close()
	// Receive ignores cancellation without a deadline; closing the
	// subscription ends it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	// The first reply confirms the subscription: only messages sent after
	// it arrive, so the flush must follow it.
	msg, err := ps.ReceiveTimeout(ctx, c.cfg.PingInterval)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", c.channel, err)
	}
	if _, ok := msg.(*redis.Subscription); !ok {
		return fmt.Errorf("subscribe %s: unexpected reply %T", c.channel, msg)
	}
	c.Flush()
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, c.cfg.PingInterval)
		if err != nil {
			if !isTimeout(err) || ctx.Err() != nil {
				return fmt.Errorf("receive on %s: %w", c.channel, err)
			}
			if pinged {
				return errNoPong
			}
			if err := ps.Ping(ctx); err != nil {
				return fmt.Errorf("ping %s: %w", c.channel, err)
			}
			pinged = true
			continue
		}
		pinged = false
		if m, ok := msg.(*redis.Message); ok && !c.apply(m.Payload) {
			c.cfg.Logger.Warn("ignoring malformed key revocation message", "channel", c.channel)
		}
	}
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
