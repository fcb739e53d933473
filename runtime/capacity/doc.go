// Package capacity is the reference workload's KV-cache and throughput arithmetic as code:
// KV bytes per token, KV capacity of a deployment, the time of a decoding
// step and of a prefill. The engine simulator runs on it and the capacity
// planner builds on it, so the numbers in manifests, plans and simulations
// come from one place.
//
// It also knows the EC2 instance types its GPUs come in (Instances), the
// smallest that holds a replica (SmallestInstance), what CPU and memory a
// replica may request on it (ReplicaResources), and from those the vCPU
// quota and the node GPUs a plan needs at its models' caps (Result.Quota).
// A model profile is one declaration: architecture, the checkpoint it was
// sized for (Weights), that checkpoint's format (Quantization, which must
// agree with WeightBytes) and the served name.
package capacity
