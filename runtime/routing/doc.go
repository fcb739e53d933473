// Package routing chooses the node for a request among the healthy nodes
// that serve its model. The orchestrator builds one Candidate per node from
// the node's last heartbeat (up to 5 s old) and from its own Tracker of the
// requests it assigned (always current), and asks a Policy to Pick.
//
// # The kv-aware score
//
// vLLM preempts (and time to first token jumps) when the KV cache of a
// replica fills, so the default policy sends each request to the node with
// the most free KV cache, and to none when no node has room for it: the
// request then waits in the gateway's queue, which costs less than a
// preemption on an overfull engine. For a request that needs need tokens
// (the prompt estimate plus its output cap, in whole KV blocks:
// Footprint), a node's free KV is
//
//	observed = KVCacheUsage × KVCapacityTokens + QueueDepth × need
//	           + PendingTokens − ReleasedTokens
//	free     = KVCapacityTokens − max(reserved, observed)
//
// reserved is the sum of need over this replica's requests in flight on
// the node: an upper bound on what they will grow to, which the heartbeat
// cannot see (KV usage counts the tokens of running requests now, not
// their answers to come). The observed term adds the tokens this replica
// assigned since the node's last heartbeat to the usage that heartbeat
// reported, so requests of other replicas count as soon as the node
// reports them and this replica's own count at once, and it takes off the
// needs of this replica's requests that were running at that heartbeat and
// have finished since: a heartbeat is up to 5 s old, and a node that
// finishes a request a second would otherwise look full of requests that
// are gone. Requests waiting on
// the node will take KV before a new one, so each counts as one more
// request of this size; they are part of the observed term only, since
// this replica's own waiting requests are already in reserved. A node fits when free ≥ need and it runs fewer
// than MaxNumSeqs requests; among the nodes that fit, the one with the
// most free KV wins, and a node whose socket this replica holds wins over
// it when its score is within 10 % (a forwarded request costs a pub/sub
// hop per chunk). Ties go to the lower node id, so a choice is
// reproducible.
//
// When no node fits, a node with nothing running, waiting or in flight
// still takes the request: a request bigger than any node's free estimate
// must not wait forever on an idle fleet. A node that does not report its
// KV capacity (0) is scored by its load only.
//
// # Baselines
//
// round-robin rotates over the nodes and least-request picks the fewest
// requests in flight (then the shortest engine queue); both skip only nodes
// at MaxNumSeqs. They exist to be measured against: kv-aware keeps
// preemptions at zero where round-robin causes them (a burst of long
// requests: TestKVAwareBeatsRoundRobin), and with the reference workload's traffic mix on
// simulated nodes it has the lower p95 time to first token
// (BenchmarkRoutingPolicies).
package routing
