// Package enginesim is a stand-in for vLLM on machines without GPUs. To a
// client it looks like vLLM's OpenAI-compatible server: the same routes,
// the same stream bytes, the same errors; to Prometheus it exports vLLM's
// metric names. Behind that it runs continuous batching from first
// principles: one engine goroutine steps all running sequences together,
// each step as long as capacity.Deployment says reading the weights and the
// KV cache takes, with block-granular KV memory, a FCFS waiting queue and
// preemption by recompute when the cache runs out. Faults (errors, engine
// death mid-stream, hangs, slow starts) can be injected at start and at run
// time.
//
// Time is injected: a Clock that runs faster than real time for benchmarks
// and the local mode, or a FakeClock with which a test drives steps one by
// one (Sim.Step) and runs in milliseconds.
package enginesim
