package nodeagent

import (
	"fmt"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// maxPendingDones caps the done records kept for an ack: 10,000 records of
// about 150 bytes are 1.5 MiB, hours of a node's traffic with no server to
// take them; past it the oldest are dropped (and counted), as the
// completion log still has them.
const maxPendingDones = 10_000

// doneStore keeps every done record until an ack names it, across
// connections, oldest first, so each new connection can replay them. The
// records sit in golang-lru's simplelru, used as an insertion-ordered map:
// the store only adds, removes and lists, so the order stays that of the
// latest add.
type doneStore struct {
	mu      sync.Mutex
	limit   int
	records *simplelru.LRU[string, *nodeproto.Done] // by request id
	dropped int64
}

// newDoneStore returns an empty store keeping at most limit records.
func newDoneStore(limit int) (*doneStore, error) {
	records, err := simplelru.NewLRU[string, *nodeproto.Done](limit, nil)
	if err != nil {
		return nil, fmt.Errorf("done store: %w", err)
	}
	return &doneStore{limit: limit, records: records}, nil
}

// add keeps d as the newest record, replacing an older one of the same
// request, and returns the record it dropped to stay under the cap, if any.
func (s *doneStore) add(d *nodeproto.Done) *nodeproto.Done {
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest *nodeproto.Done
	if !s.records.Contains(d.RequestID) && s.records.Len() >= s.limit {
		_, oldest, _ = s.records.RemoveOldest()
		s.dropped++
	}
	s.records.Add(d.RequestID, d)
	return oldest
}

// ack forgets the named requests' records; unknown ids are ignored.
func (s *doneStore) ack(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.records.Remove(id)
	}
}

// snapshot returns the records not yet acknowledged, oldest first.
func (s *doneStore) snapshot() []*nodeproto.Done {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records.Values()
}

// counts returns how many records wait for an ack and how many were
// dropped at the cap.
func (s *doneStore) counts() (pending int, dropped int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records.Len(), s.dropped
}
