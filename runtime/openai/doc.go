// Package openai holds the OpenAI wire types the platform speaks: chat
// completion requests (unknown fields kept when a body is forwarded),
// responses, stream chunks in the byte format vLLM emits, usage, the error
// body, and a reader and writer for server-sent events.
//
// The package imports nothing of ours: the gateway, the node agent and the
// engine simulator all build on it.
package openai
