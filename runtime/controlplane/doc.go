// Package controlplane assembles an orchestrator replica's process from
// its parts: the node registry, the node tokens and event log in the
// database, the gateways' queue depth and the declared models behind the
// pending gauge, the cold-start board, the metrics, and the servers of the
// node socket, internal dispatch and /metrics. The `llmplat orchestrator`
// command, the local mode and the test platform all start replicas
// through it, so all run the same wiring; it is the twin of frontdoor.
package controlplane
