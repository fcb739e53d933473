// Package quota enforces the gateway's per-key limits in Redis and runs the
// per-model wait queue that all gateway replicas share.
//
// A Limiter holds three checks, each one atomic Lua script (or one plain
// command) and so one round trip:
//
//   - concurrent streams (streams:{key_id}): a sorted set of request ids
//     scored by each slot's deadline. Taking a slot purges expired ones first,
//     so a slot whose holder crashed or lost its release is free again after
//     Config.MaxStreamDuration, without waiting for a key TTL;
//   - requests per minute (rl:{key_id}:rpm): an exact sliding-window log;
//   - tokens per UTC day (tpd:{key_id}:{yyyymmdd}): a counter added to at
//     settle time and compared at admission.
//
// Admit runs the three in one script. A replica that sees a key often takes
// tickets with it (lease.go): slots and places in the minute held ahead in
// Redis, on which the key's next requests are admitted without a round trip
// of their own.
//
// Beside them, refusal counters (refused:{key_id}:{yyyymmddhhmm}) count a
// key's 429s per minute for people to read (CountRefusal, ReadRefusals);
// admission never reads them, and only a refused request writes one.
//
// A Queue is the FIFO of requests that found no capacity (q:{model}), woken
// through pub/sub (q:{model}:wake) when a stream of the model ends.
//
// Every key and channel is built by one key builder from Config.Prefix. The
// variable part of each key sits inside literal braces, a Redis Cluster hash
// tag, so a script's keys always share a slot; the code takes a
// redis.UniversalClient and runs unchanged on a single server, a cluster and
// the local mode's in-process miniredis.
//
// Time that several gateway replicas must agree on (slot deadlines, the rate
// window, queue deadlines) comes from the Redis server's TIME inside the
// scripts, never from a replica's clock. The only Go-side time, all of it
// from Config.Clock, is the UTC day that names a tokens-per-day key, how
// long a replica's own tickets stay usable, and a queued request's own
// timers (its poll, its limit). Scripts that read TIME and then write need
// script effects replication, so the server must be Redis 5 or later (the
// default there, the only mode since 7).
package quota
