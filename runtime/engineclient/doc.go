// Package engineclient talks to OpenAI-compatible engines: it posts a
// job's body (OpenEngineStream), reads the engine's server-sent events,
// and parses each of them once (ParseEvent) into a dispatch.Event. Direct
// is a dispatch.Dispatcher over fixed engine URLs, round-robin per model:
// the gateway's dispatcher before the orchestrator, and the floor the
// orchestrator's routing is measured against.
//
// ParseEvent is the platform's one reader of an engine's events: it reads
// what an event's JSON means, never how it is spelled, so an engine that
// spaces, indents or orders its JSON otherwise than vLLM is counted and
// billed alike. It runs where the platform first holds an event — the
// orchestrator, on the cloud path and on the node socket's (a node agent
// parses for its own done record, but the platform trusts none of it) —
// and nowhere after: the gateway cannot import this package. An engine
// stream hands on each event as valid UTF-8: AppendValidUTF8 is the rule,
// the node agent's too.
package engineclient
