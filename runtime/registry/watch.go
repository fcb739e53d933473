package registry

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Watch reports the nodes whose records expire, until ctx ends; it then
// returns nil. Every Config.WatchInterval it reads nodes:live and probes
// the members whose last beat is older than the TTL (and the nodes it saw
// alive that have left the index since), so a death is reported within
// about TTL + WatchInterval of the node's last beat. onDead gets the node
// and the epoch of the record that expired, once per death, from Watch's
// own goroutine; a node that registers again and dies again is reported
// again under its new epoch.
//
// Only deaths of nodes this Watch saw alive are reported: a record that
// had already expired when Watch started belonged to a socket of some
// earlier process, and is only removed from the index. A node that left
// through Deregister is not reported. Failed polls are logged and retried
// at the next interval. Keyspace notifications are not used: managed Redis
// services do not enable them by default, and they are lost while a
// replica is disconnected.
func (r *Registry) Watch(ctx context.Context, onDead func(nodeID string, epoch int64)) error {
	w := watcher{r: r, seen: make(map[string]struct{}), onDead: onDead}
	t := r.cfg.Clock.NewTicker(r.cfg.WatchInterval)
	defer t.Stop()
	for {
		if err := w.poll(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("node registry watch poll failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// watcher is the state of one Watch: the nodes it has seen alive.
type watcher struct {
	r      *Registry
	seen   map[string]struct{}
	onDead func(nodeID string, epoch int64)
}

// suspect is a node whose record may be gone.
type suspect struct {
	id      string
	scoreMS int64 // its score in nodes:live, or -1 when it is not there
	probe   *redis.Cmd
}

// poll runs one round: read the index, probe the suspects, report deaths.
func (w *watcher) poll(ctx context.Context) error {
	r := w.r
	var now *redis.TimeCmd
	var live *redis.ZSliceCmd
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		live = p.ZRangeWithScores(ctx, r.keys.Live(), 0, -1)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read live index: %w", err)
	}
	// A record expires TTL after the beat that set its score; until then
	// it surely lives, unless deregistered (it then left the index too).
	staleBefore := now.Val().UnixMilli() - r.cfg.TTL.Milliseconds()
	var suspects []suspect
	indexed := make(map[string]struct{}, len(live.Val()))
	for _, m := range live.Val() {
		id := member(m)
		indexed[id] = struct{}{}
		if int64(m.Score) >= staleBefore {
			w.seen[id] = struct{}{}
			continue
		}
		suspects = append(suspects, suspect{id: id, scoreMS: int64(m.Score)})
	}
	for id := range w.seen {
		if _, ok := indexed[id]; !ok {
			suspects = append(suspects, suspect{id: id, scoreMS: -1})
		}
	}
	if len(suspects) == 0 {
		return nil
	}
	return w.settle(ctx, suspects)
}

// settle probes the suspects, removes the dead from the index and reports
// the deaths this watcher saw coming.
func (w *watcher) settle(ctx context.Context, suspects []suspect) error {
	r := w.r
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range suspects {
			suspects[i].probe = probeScript.Eval(ctx, p,
				[]string{r.keys.Node(s.id), r.keys.Epoch(s.id), r.keys.Left(s.id)})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("probe node records: %w", err)
	}
	var gone []redis.Z
	for _, s := range suspects {
		v, err := ints(s.probe, 3)
		if err != nil {
			return fmt.Errorf("probe %s: %w", s.id, err)
		}
		if v[0] == 1 {
			// Alive with a stale score: the index update after its last
			// beat failed. The next beat fixes the score.
			w.seen[s.id] = struct{}{}
			continue
		}
		if s.scoreMS >= 0 {
			gone = append(gone, redis.Z{Member: s.id, Score: float64(s.scoreMS)})
		}
		_, saw := w.seen[s.id]
		delete(w.seen, s.id)
		if saw && v[2] == 0 {
			w.onDead(s.id, v[1])
		}
	}
	return r.unindexAll(ctx, gone)
}
