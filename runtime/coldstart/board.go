package coldstart

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
)

const (
	// StateTTL is how long a replica's published state counts: three of
	// the orchestrators' one-second refreshes, so one late refresh does
	// not flip a model to zero, and a replica that died stops counting
	// within seconds.
	StateTTL = 3 * time.Second
	// HoldMargin is added to a model's expected load time to hold a
	// refused caller's demand: a load a little slower than expected still
	// finds the wake signal up when its replica turns Ready.
	HoldMargin = 5 * time.Minute
	// MaxHold bounds any hold: a wake that has not produced a ready
	// replica in 45 min has failed (no GPU capacity, a crash loop), and
	// holding GPUs up for it longer only costs money.
	MaxHold = 45 * time.Minute
	// MinRetryAfter is the least Retry-After advised: once the expected
	// load time has passed without a ready replica, clients come back at
	// this pace rather than at once.
	MinRetryAfter = 5 * time.Second
	// DefaultExpectedLoad is a model's expected load time when nothing
	// better is known (on-premises nodes and the local mode, whose models
	// have no Kubernetes Service): about what a 70B takes to read from a
	// local disk and warm up, so clients neither spin nor wait far past a
	// typical load.
	DefaultExpectedLoad = 5 * time.Minute
)

// Verdict is one replica's view of a model.
type Verdict int

// Verdicts are ordered by hope: a replica that sees several nodes of a
// model gives the highest.
const (
	// Zero: no ready replica or node serves the model.
	Zero Verdict = iota
	// Unsure: a node that serves it has registered but not yet said
	// whether its engine is up (its first heartbeat): callers are not
	// refused, and the held demand stays.
	Unsure
	// Ready: a ready replica or node serves it; its wake is over.
	Ready
)

// Board is the shared wake record on Redis.
type Board struct {
	rdb    redis.UniversalClient
	prefix string
	clock  clock.PassiveClock
}

// New returns a Board on rdb whose keys start with prefix; clk is its
// clock (nil means the real clock).
func New(rdb redis.UniversalClient, prefix string, clk clock.PassiveClock) (*Board, error) {
	if rdb == nil {
		return nil, errors.New("coldstart: a redis client is required")
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Board{rdb: rdb, prefix: prefix, clock: clk}, nil
}

// keys are a model's three keys: the replicas' published states (a hash
// replica → "ready load_ms at_ms"), the wake's start (ms) and the held
// demand (a sorted set caller → hold's end in ms).
func (b *Board) keys(model string) []string {
	tag := b.prefix + "coldstart:{" + model + "}:"
	return []string{tag + "state", tag + "start", tag + "held"}
}

// Publish records replica's view of model, and the load time expected
// from zero (zero or less means DefaultExpectedLoad). A model at zero for
// every replica that speaks is at zero; any fresh Ready or Unsure says it
// is not. A Ready model's wake is over: its held demand is dropped.
func (b *Board) Publish(ctx context.Context, replica, model string, v Verdict, load time.Duration) error {
	if load <= 0 {
		load = DefaultExpectedLoad
	}
	if v < Zero || v > Ready {
		return fmt.Errorf("publish %s state: verdict %d", model, v)
	}
	err := publishScript.Run(ctx, b.rdb, b.keys(model), replica, int(v), load.Milliseconds(), b.clock.Now().UnixMilli(),
		StateTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("publish %s state: %w", model, err)
	}
	return nil
}

// Refuse reports whether model is at zero. When it is, it records
// caller's demand (one entry per caller, however often it asks) until the
// hold passes and returns the wait to advise:
// the expected load time less the time the wake has run, at least
// MinRetryAfter.
func (b *Board) Refuse(ctx context.Context, model, caller string) (time.Duration, bool, error) {
	now := b.clock.Now().UnixMilli()
	res, err := refuseScript.Run(ctx, b.rdb, b.keys(model), caller, now, StateTTL.Milliseconds(),
		HoldMargin.Milliseconds(), MaxHold.Milliseconds(), 0).Int64Slice()
	if err != nil {
		return 0, false, fmt.Errorf("refuse at zero %s: %w", model, err)
	}
	if len(res) != 3 || res[0] == 0 {
		return 0, false, nil
	}
	load, started := time.Duration(res[1])*time.Millisecond, res[2]
	left := load - time.Duration(now-started)*time.Millisecond
	return max(left, MinRetryAfter), true, nil
}

// AtZero reports whether model is at zero now, holding nothing: for
// waits and checks, not for callers.
func (b *Board) AtZero(ctx context.Context, model string) (bool, error) {
	res, err := refuseScript.Run(ctx, b.rdb, b.keys(model), "", b.clock.Now().UnixMilli(), StateTTL.Milliseconds(),
		HoldMargin.Milliseconds(), MaxHold.Milliseconds(), 1).Int64Slice()
	if err != nil {
		return false, fmt.Errorf("at zero %s: %w", model, err)
	}
	return len(res) > 0 && res[0] == 1, nil
}

// Held returns the refused callers of model whose demand still holds.
func (b *Board) Held(ctx context.Context, model string) (int64, error) {
	n, err := b.rdb.ZCount(ctx, b.keys(model)[2], "("+strconv.FormatInt(b.clock.Now().UnixMilli(), 10), "+inf").Result()
	if err != nil {
		return 0, fmt.Errorf("held demand %s: %w", model, err)
	}
	return n, nil
}

// publishScript: KEYS state, start, held; ARGV replica, verdict, load_ms,
// now_ms, ttl_ms. The state hash lives as long as a fresh entry may.
var publishScript = redis.NewScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if ARGV[2] == '2' then
  redis.call('DEL', KEYS[2], KEYS[3])
end
return 1
`)

// refuseScript: KEYS state, start, held; ARGV caller, now_ms, ttl_ms,
// margin_ms, max_hold_ms, probe. It answers {0} when no fresh state says
// the model is at zero (a fresh Ready or Unsure wins over any Zero, and no
// fresh state at all means nobody knows: the request takes the queue as
// before), else {1, load_ms, start_ms} after holding the caller's demand
// — or, with probe 1, at once, holding nothing.
var refuseScript = redis.NewScript(`
local now = tonumber(ARGV[2])
local fresh = now - tonumber(ARGV[3])
local kv = redis.call('HGETALL', KEYS[1])
local zero, load = false, 0
for i = 2, #kv, 2 do
  local r, l, at = string.match(kv[i], '^(%d) (%d+) (%d+)$')
  if r and tonumber(at) >= fresh then
    if r ~= '0' then return {0} end
    zero = true
    load = math.max(load, tonumber(l))
  end
end
if not zero then return {0} end
if ARGV[6] == '1' then return {1} end
local hold = math.min(load + tonumber(ARGV[4]), tonumber(ARGV[5]))
redis.call('SET', KEYS[2], now, 'NX', 'PX', hold)
local start = tonumber(redis.call('GET', KEYS[2]))
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZADD', KEYS[3], now + hold, ARGV[1])
redis.call('PEXPIRE', KEYS[3], hold)
return {1, load, start}
`)
