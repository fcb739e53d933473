// Package gateway is the platform's HTTP front door: the OpenAI-compatible
// API, the admission pipeline in front of it, and the relay that streams an
// engine's answer back to the client. It depends on a dispatch.Dispatcher
// for the engine side and never on the orchestrator's internals.
package gateway
