package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Registry reads and writes node records in Redis. It is safe for
// concurrent use, and any number of orchestrator replicas may share one
// Redis: every decision is made inside the server.
type Registry struct {
	rdb  redis.UniversalClient
	cfg  Config
	keys Keys
	// offsetMS is the Redis server's clock minus the local one, learned
	// from AllowRegistration's replies; it only improves the guess of the
	// server's current second.
	offsetMS atomic.Int64
}

// New returns a Registry on rdb (a client, a cluster client or a client
// of the local mode's embedded server).
func New(rdb redis.UniversalClient, cfg Config) (*Registry, error) {
	if rdb == nil {
		return nil, errors.New("registry: a redis client is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Registry{rdb: rdb, cfg: cfg, keys: NewKeys(cfg.Prefix)}, nil
}

// Keys returns the key builder the Registry uses; the orchestrator takes
// its forwarding channels' names from it.
func (r *Registry) Keys() Keys { return r.keys }

// TTL returns the life of a record without heartbeats.
func (r *Registry) TTL() time.Duration { return r.cfg.TTL }

// Register records that rec's node connected to replica rec.Owner and
// returns the connection's epoch: greater than every epoch the node had
// before, whichever replica allocated it. The new record replaces any
// previous one, whose connection's later calls are refused from now on.
// The record is active, beat at registration time and lives for the TTL.
//
// On an error after the record was written (the index update failed), the
// record simply expires: the caller treats the registration as failed.
func (r *Registry) Register(ctx context.Context, rec NodeRecord) (int64, error) {
	if err := rec.validate(); err != nil {
		return 0, err
	}
	fields, err := recordFields(rec)
	if err != nil {
		return 0, fmt.Errorf("register %s: %w", rec.ID, err)
	}
	args := append([]any{millis(r.cfg.TTL), millis(epochRetention)}, fields...)
	cmd := registerScript.Run(ctx, r.rdb,
		[]string{r.keys.Node(rec.ID), r.keys.Epoch(rec.ID), r.keys.Left(rec.ID)}, args...)
	v, err := ints(cmd, 2)
	if err != nil {
		return 0, fmt.Errorf("register %s: %w", rec.ID, err)
	}
	if err := r.index(ctx, rec.ID, v[1]); err != nil {
		return 0, fmt.Errorf("register %s: %w", rec.ID, err)
	}
	return v[0], nil
}

// Heartbeat records hb for the node's connection of epoch and keeps the
// record alive for another TTL. It reports false, and changes nothing,
// when the record has another epoch (a newer connection replaced this
// one) or is gone (it expired, or was deregistered): either way this
// connection no longer owns the node, and the caller should stop beating
// and close it once its in-flight requests are done. True with an error
// means the beat was stored but the live index was not updated; the next
// beat repairs it.
func (r *Registry) Heartbeat(ctx context.Context, nodeID string, epoch int64, hb Heartbeat) (bool, error) {
	if err := checkName("node id", nodeID); err != nil {
		return false, err
	}
	if err := hb.validate(); err != nil {
		return false, err
	}
	fields, err := beatFields(hb)
	if err != nil {
		return false, fmt.Errorf("heartbeat %s: %w", nodeID, err)
	}
	gpu := ""
	if hb.GPUUtil != nil {
		gpu = formatFloat(*hb.GPUUtil)
	}
	args := append([]any{epoch, millis(r.cfg.TTL), millis(epochRetention), gpu}, fields...)
	cmd := heartbeatScript.Run(ctx, r.rdb, []string{r.keys.Node(nodeID), r.keys.Epoch(nodeID)}, args...)
	v, err := ints(cmd, 2)
	if err != nil {
		return false, fmt.Errorf("heartbeat %s: %w", nodeID, err)
	}
	if v[0] != 1 {
		return false, nil
	}
	if err := r.index(ctx, nodeID, v[1]); err != nil {
		return true, fmt.Errorf("heartbeat %s: %w", nodeID, err)
	}
	return true, nil
}

// SetState sets the node's state (draining or active again) if epoch still
// owns the record, and reports whether it did. It does not keep the record
// alive: only heartbeats do.
func (r *Registry) SetState(ctx context.Context, nodeID string, epoch int64, state State) (bool, error) {
	if err := checkName("node id", nodeID); err != nil {
		return false, err
	}
	if !state.valid() {
		return false, invalid("state %q", state)
	}
	n, err := setStateScript.Run(ctx, r.rdb, []string{r.keys.Node(nodeID)}, epoch, string(state)).Int64()
	if err != nil {
		return false, fmt.Errorf("set state of %s: %w", nodeID, err)
	}
	return n == 1, nil
}

// Deregister deletes the node's record if epoch still owns it (a clean
// close of that connection) and reports whether it did. A replica holding
// a superseded connection can never delete its successor's record. The
// node is not reported by Watch as dead.
func (r *Registry) Deregister(ctx context.Context, nodeID string, epoch int64) (bool, error) {
	if err := checkName("node id", nodeID); err != nil {
		return false, err
	}
	cmd := deregisterScript.Run(ctx, r.rdb, []string{r.keys.Node(nodeID), r.keys.Left(nodeID)},
		epoch, millis(r.cfg.tombstoneRetention()))
	v, err := ints(cmd, 2)
	if err != nil {
		return false, fmt.Errorf("deregister %s: %w", nodeID, err)
	}
	if v[0] != 1 {
		return false, nil
	}
	// A registration racing this one indexed the node with a newer score,
	// which the conditional removal leaves alone.
	if err := r.unindex(ctx, r.rdb, nodeID, v[1]).Err(); err != nil {
		return true, fmt.Errorf("deregister %s: %w", nodeID, err)
	}
	return true, nil
}

// index puts nodeID in nodes:live with the time of its latest beat. GT
// keeps the later of two racing updates.
func (r *Registry) index(ctx context.Context, nodeID string, beatMS int64) error {
	err := r.rdb.ZAddGT(ctx, r.keys.Live(), redis.Z{Score: float64(beatMS), Member: nodeID}).Err()
	if err != nil {
		return fmt.Errorf("index live node: %w", err)
	}
	return nil
}

// unindex removes nodeID from nodes:live unless its score rose above
// seenMS since it was read. It uses EVAL, not EVALSHA, so it also works
// queued in a pipeline.
func (r *Registry) unindex(ctx context.Context, s redis.Scripter, nodeID string, seenMS int64) *redis.Cmd {
	return liveRemoveScript.Eval(ctx, s, []string{r.keys.Live()}, nodeID, seenMS)
}

// millis converts d to whole milliseconds for a script argument.
func millis(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10)
}
