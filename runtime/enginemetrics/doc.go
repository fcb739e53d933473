// Package enginemetrics reads an engine's load from its Prometheus
// exposition, by vLLM's metric names: the requests waiting and running and
// the fraction of the KV cache in use. The node agent builds its
// heartbeats from it, and the orchestrator reads cloud engines, which have
// no agent, the same way.
package enginemetrics
