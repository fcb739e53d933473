// Package dispatch is the seam between the gateway and whatever runs a
// request on an engine: the interface, the job's envelope and the typed
// event. The gateway admits a request, then hands a Job to a Dispatcher
// and relays the Stream it gets back. Two transports implement it:
// package engineclient talks to engines (Direct, for fixed engine URLs,
// and the engine stream the orchestrator opens to cloud engines), and
// package internalhop carries jobs and events between a gateway and an
// orchestrator replica when they run apart; the orchestrator implements
// Dispatcher by routing to nodes, in process in the local mode.
//
// A Job carries what the gateway knows once it admitted a request — the
// prompt's estimate, the output cap, the engine's body encoded once — so
// no hop decodes the request again. An Event carries what the one parse
// of an engine event found (engineclient.ParseEvent): its usage, its
// running usage, an error, its text counted with the stand-in tokenizer
// (Event.Text, the platform's own measure of what it relayed, by which the
// gateway judges an engine's usage with ledger.BoundUsage; so dispatch
// sits above package tokens in the import layers), whether a key repeats,
// and where its model and usage lie, which the gateway edits with
// Event.Rewrite without reading the event again.
package dispatch
