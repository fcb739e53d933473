// Package capacity is the seed's KV-cache and throughput arithmetic as code:
// KV bytes per token, KV capacity of a deployment, the time of a decoding
// step and of a prefill. The engine simulator runs on it and the capacity
// planner builds on it, so the numbers in manifests, plans and simulations
// come from one place.
package capacity
