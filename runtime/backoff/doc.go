// Package backoff is the platform's one retry schedule: exponential with
// full jitter, so that many clients cut off together do not come back in
// lockstep. The n-th wait since the last reset is drawn uniformly from
// [0, min(Cap, Base·2ⁿ)); advice from the other side (a Retry-After)
// replaces the next draw; a reset can be made to wait until a connection
// stayed up long enough, so a link that flaps keeps backing off.
//
// Each user names its Schedule beside its reason: the node agent's
// reconnect (nodeproto.ReconnectSchedule) and the orchestrator's reads of
// a pub/sub subscription that failed. The admin HTTP client retries
// through go-retryablehttp instead.
//
// Libraries were weighed: k8s.io/apimachinery's wait.Backoff and
// cenkalti/backoff jitter around the ceiling rather than below it (no full
// jitter), draw from a random source that cannot be injected (the agent's
// tests replay seeded schedules), and know neither a server's advice nor a
// stability threshold for the reset.
package backoff
