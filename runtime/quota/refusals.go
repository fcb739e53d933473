package quota

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// RefusalWindow is how far back ReadRefusals counts a key's 429s: the
	// console's "is a limit being hit now" is the last hour.
	RefusalWindow = time.Hour
	// refusalBucket is one counter's span: a minute, so the window is
	// sixty counters read in one MGET.
	refusalBucket = time.Minute
	// refusalTTL keeps a minute's counter until the window no longer
	// reaches it, and one minute more for clocks that differ a little
	// between the replica that wrote it and the one that reads it.
	refusalTTL = RefusalWindow + 2*refusalBucket
)

// Refusals is the counter of a key's 429s in the UTC minute of t.
func (k Keys) Refusals(keyID string, t time.Time) string {
	return k.prefix + "refused:{" + keyID + "}:" + t.UTC().Truncate(refusalBucket).Format("200601021504")
}

// CountRefusal counts one refusal of keyID by its limits (a 429) in the
// current minute of Config.Clock: one pipelined INCR and EXPIRE, paid only by
// refused requests. The counters exist for people to read (the console),
// never for admission.
func (l *Limiter) CountRefusal(ctx context.Context, keyID string) error {
	if err := checkName("key", keyID); err != nil {
		return err
	}
	key := l.keys.Refusals(keyID, l.cfg.Clock.Now())
	pipe := l.rdb.Pipeline()
	pipe.Incr(ctx, key)
	pipe.Expire(ctx, key, refusalTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("count refusal of %s: %w", keyID, err)
	}
	return nil
}

// ReadRefusals returns how many of keyID's requests its limits refused in
// the RefusalWindow before now, by whole minutes (the current one
// included), from the counters CountRefusal writes under keys' prefix.
func ReadRefusals(ctx context.Context, rdb redis.UniversalClient, keys Keys, keyID string, now time.Time) (int64, error) {
	if err := checkName("key", keyID); err != nil {
		return 0, err
	}
	n := int(RefusalWindow / refusalBucket)
	names := make([]string, n)
	for i := range n {
		names[i] = keys.Refusals(keyID, now.Add(-time.Duration(i)*refusalBucket))
	}
	vals, err := rdb.MGet(ctx, names...).Result()
	if err != nil {
		return 0, fmt.Errorf("read refusals of %s: %w", keyID, err)
	}
	var total int64
	for _, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue // no refusal in that minute
		}
		c, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read refusals of %s: %w", keyID, err)
		}
		total += c
	}
	return total, nil
}
