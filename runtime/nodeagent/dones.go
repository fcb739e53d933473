package nodeagent

import (
	"container/list"
	"sync"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// maxPendingDones caps the done records kept for an ack: 10,000 records of
// about 150 bytes are 1.5 MiB, hours of a node's traffic with no server to
// take them; past it the oldest are dropped (and counted), as the
// completion log still has them.
const maxPendingDones = 10_000

// doneStore keeps every done record until an ack names it, across
// connections, oldest first, so each new connection can replay them.
type doneStore struct {
	mu      sync.Mutex
	limit   int
	order   *list.List // of *nodeproto.Done, oldest first
	byID    map[string]*list.Element
	dropped int64
}

func newDoneStore(limit int) *doneStore {
	return &doneStore{limit: limit, order: list.New(), byID: make(map[string]*list.Element)}
}

// add keeps d as the newest record, replacing an older one of the same
// request, and returns the record it dropped to stay under the cap, if any.
func (s *doneStore) add(d *nodeproto.Done) *nodeproto.Done {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[d.RequestID]; ok {
		s.order.Remove(e)
	}
	s.byID[d.RequestID] = s.order.PushBack(d)
	if s.order.Len() <= s.limit {
		return nil
	}
	oldest := s.order.Remove(s.order.Front()).(*nodeproto.Done)
	delete(s.byID, oldest.RequestID)
	s.dropped++
	return oldest
}

// ack forgets the named requests' records; unknown ids are ignored.
func (s *doneStore) ack(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if e, ok := s.byID[id]; ok {
			s.order.Remove(e)
			delete(s.byID, id)
		}
	}
}

// snapshot returns the records not yet acknowledged, oldest first.
func (s *doneStore) snapshot() []*nodeproto.Done {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*nodeproto.Done, 0, s.order.Len())
	for e := s.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*nodeproto.Done))
	}
	return out
}

// counts returns how many records wait for an ack and how many were
// dropped at the cap.
func (s *doneStore) counts() (pending int, dropped int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len(), s.dropped
}
