// Package registry keeps the node registry in Redis: which GPU nodes are
// connected, which orchestrator replica owns each node's socket, what each
// node serves and how loaded it was at its last heartbeat.
//
// # Records and epochs
//
// A node's record is the hash node:{node_id}. It lives for Config.TTL (15 s,
// three missed 5 s heartbeats) and every accepted heartbeat refreshes it, so
// a node that stops beating disappears by itself. Every Register allocates a
// new epoch with INCR on node:{node_id}:epoch, a counter that outlives the
// record, so epochs of a node only ever grow, across expiries and across
// replicas. Heartbeat, SetState and Deregister are compare-and-set on the
// epoch: a call carrying any other epoch than the record's (a late message
// from a connection that has since been replaced, or a replica that lost the
// node) changes nothing and reports false. That is what lets several
// orchestrator replicas own sockets of the same node over time without a
// lock: the newest registration always wins and can never be overwritten.
//
// # Atomicity and the live index
//
// Every change of a record is one Lua script over the node's own keys
// (node:{id}, node:{id}:epoch, node:{id}:left), which share the hash tag
// {id} and so one Redis Cluster slot. nodes:live, a sorted set of node id →
// time of the last beat, lists the nodes without SCAN. It lives in another
// slot, so it is written by a second command right after the script and is
// only an index: every reader checks its members against their records, and
// List and Watch remove members whose record is gone. A node registered but
// not yet indexed (the second command failed) is indexed again by its next
// heartbeat. There is no per-model index: ForModel filters List, which reads
// every live record anyway, so no second index can drift from the records.
//
// # Dead nodes
//
// Watch polls nodes:live every Config.WatchInterval instead of listening to
// keyspace notifications, which managed Redis services (ElastiCache) do not
// enable by default and which are lost while a subscriber is disconnected.
// A member whose last beat is older than the TTL is probed; when its record
// is gone the node died, and Watch reports it once, with the epoch of the
// record that expired. A node that left through Deregister leaves a short-lived
// tombstone (node:{id}:left) and is not reported. Each replica runs its own
// Watch and is told of every death it saw coming (a node it had seen alive),
// whichever replica cleans the index first: the replica that owned the
// socket cancels the node's in-flight requests, the others only stop
// routing to it. The TTL is also the reconnect window after a replica
// fails: a node that registers again within it is handed over to its new
// owner under a new epoch and is never reported dead.
//
// # Registration rate limit
//
// AllowRegistration counts attempts in reg:{unix_second}, a counter per
// second of the Redis server's clock shared by all replicas, so the cluster
// as a whole admits at most the limit in any one second. A refused attempt
// is told to come back later in proportion to how far over the limit it
// was, with jitter, so a reconnect storm is spread over the following
// seconds instead of returning at once.
//
// AllowNodeRegistration limits each node id on its own, in a fixed window
// counted in node:{id}:regs: a node that registers in a loop with its own
// valid token uses up its window, not the cluster-wide rate, so it cannot
// keep the other nodes out. Only admissions count, so a refused node's
// window ends when it would have.
//
// Keys and pub/sub channels are built by Keys from Config.Prefix. Time that
// replicas must agree on comes from Redis TIME inside the scripts. The code
// takes a redis.UniversalClient and runs on a single server, a cluster and
// the local mode's miniredis (Redis 6.2 or later).
package registry
