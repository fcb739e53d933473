// Package internalhop carries jobs from a gateway to an orchestrator
// replica and their events back, when the two run as separate processes:
// Remote is the gateway's dispatch.Dispatcher, NewRemoteHandler the
// replica's endpoint (POST /internal/v1/dispatch, behind the platform's
// internal token).
//
// The job travels as its envelope: the model, the prompt's estimate and
// the output cap in headers, the engine body's members as the body, so
// the replica decodes nothing. The answer is a stream of records
// (EventsType): each event's bytes after what the replica's one parse
// found in them (usage, running usage, error, counted text, a repeated
// key, where its model and usage lie), then an end record for the
// engine's [DONE]. The gateway reads the records, never the events'
// JSON; a stream that ends without the end record broke behind the
// replica.
package internalhop
