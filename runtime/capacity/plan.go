package capacity

import (
	"fmt"
	"math"
)

// Plan sizes every workload and the fleet: defaults are filled, the input is
// validated, then each model gets its memory, flags, replicas, throughput
// and queue budget, and the fleet its GPUs and cost.
func Plan(in Input) (Result, error) {
	in = in.WithDefaults()
	if err := in.Validate(); err != nil {
		return Result{}, fmt.Errorf("plan: %w", err)
	}
	res := Result{Models: make([]ModelPlan, 0, len(in.Workloads))}
	for _, w := range in.Workloads {
		res.Models = append(res.Models, planModel(w, in.Fleet))
	}
	res.Fleet = planFleet(in.Workloads, res.Models, in.Fleet)
	res.Cost = planCost(res.Fleet, in.Fleet)
	res.Quota = planQuota(in.Workloads, res.Models)
	return res, nil
}

// planModel plans one validated workload.
func planModel(w Workload, f Fleet) ModelPlan {
	d := w.Deployment
	mem := planMemory(w)
	flags := VLLMFlagsFor(w)
	reps := planReplicas(w)
	tp := planThroughput(w, priceOf(d.GPU, f))
	mp := ModelPlan{
		Model:      d.Model.Name,
		ServedName: d.Model.ServedName,
		Weights:    d.Model.Weights, Quantization: d.Model.Quantization,
		GPU:        d.GPU.Name,
		Memory:     mem,
		Flags:      flags,
		Replicas:   reps,
		Throughput: tp,
		Queue:      QueueBudgetFor(tp.ReplicaTokensPerSecond, w.PlannedStreamsPerReplica, w.AnswerTokens, reps.Replicas, f.QueueLimit.Seconds()),
		Warnings:   []string{},
	}
	if w.MaxReplicas > 0 && reps.Replicas > w.MaxReplicas {
		mp.Warnings = append(mp.Warnings, fmt.Sprintf(
			"%d replicas at peak exceed max_replicas %d", reps.Replicas, w.MaxReplicas))
	}
	if flags.MaxNumSeqs > mem.StreamsAtMaxModelLen {
		mp.Warnings = append(mp.Warnings, fmt.Sprintf(
			"--max-num-seqs %d is above the %d streams that fit at --max-model-len %d: if long contexts crowd in, vLLM preempts",
			flags.MaxNumSeqs, mem.StreamsAtMaxModelLen, w.MaxModelLen))
	}
	return mp
}

// planMemory is the KV-cache arithmetic of one replica. Streams are whole
// sequences rounded down: the reference workload's 90.6 at 2k is "about 90", its 22.6 at
// 8k is "only 22".
func planMemory(w Workload) MemoryPlan {
	d, m := w.Deployment, w.Deployment.Model
	capTokens := d.KVCapacityTokens()
	return MemoryPlan{
		KVBytesPerToken:            m.KVBytesPerToken(),
		ContextTokens:              w.ContextTokens,
		KVBytesAtContext:           m.KVBytesPerToken() * float64(w.ContextTokens),
		MaxModelLenTokens:          w.MaxModelLen,
		KVBytesAtMaxModelLen:       m.KVBytesPerToken() * float64(w.MaxModelLen),
		GPUMemoryBytes:             d.GPU.MemoryBytes,
		GPUMemoryUtilization:       d.GPUMemoryUtilization,
		TensorParallelSize:         d.TP,
		WeightBytes:                m.WeightBytesTotal(),
		ActivationBytesPerGPU:      d.ActivationBytes,
		UsableBytesPerReplica:      d.UsableBytes(),
		KVCacheBytesPerReplica:     d.KVCacheBytes(),
		KVBlocksPerReplica:         d.KVCapacityBlocks(),
		KVCapacityTokensPerReplica: capTokens,
		StreamsAtContext:           capTokens / w.ContextTokens,
		StreamsAtMaxModelLen:       capTokens / w.MaxModelLen,
		MinTensorParallelSize:      MinTensorParallelSize(w),
	}
}

// MinTensorParallelSize is the fewest GPUs per replica, a power of two up
// to the workload's TP (or that TP itself), on which the weights fit, one
// sequence of max-model-len fits and the planned streams fit at the typical
// context. The reference workload's 32B needs 2 GPUs per replica; its 70B
// FP8 fits on 2 by memory alone, and the reference workload's 4 buy KV room
// and speed. Zero means
// none fits, which Validate has already excluded for the chosen TP.
func MinTensorParallelSize(w Workload) int {
	fits := func(tp int) bool {
		d := w.Deployment
		d.TP = tp
		c := d.KVCapacityTokens()
		return d.KVCacheBytes() > 0 && c >= w.MaxModelLen && c/w.ContextTokens >= int64(w.PlannedStreamsPerReplica)
	}
	for tp := 1; tp < w.Deployment.TP; tp *= 2 {
		if fits(tp) {
			return tp
		}
	}
	if fits(w.Deployment.TP) {
		return w.Deployment.TP
	}
	return 0
}

// ReplicasAtPeak is the reference workload's replica rule: the load needs
// ceil(peak ÷ planned) replicas; when there is load, spare replicas are
// added on top (the reference workload's 8B: ceil(140 ÷ 32) = 5, plus 1 spare for a spot
// reclaim = 6; its 32B and 70B have no spare: 4 and 2); the result is never
// below the warm floor. It returns the replicas the load needs and the
// replicas to run.
func ReplicasAtPeak(peak, planned, spare, floor int) (forLoad, replicas int) {
	forLoad = (peak + planned - 1) / planned
	replicas = forLoad
	if forLoad > 0 {
		replicas += spare
	}
	return forLoad, max(replicas, floor)
}

// planReplicas applies ReplicasAtPeak to a workload.
func planReplicas(w Workload) ReplicaPlan {
	forLoad, n := ReplicasAtPeak(w.PeakStreams, w.PlannedStreamsPerReplica, w.SpareReplicas, w.MinReplicas)
	return ReplicaPlan{
		PeakStreams:              w.PeakStreams,
		PlannedStreamsPerReplica: w.PlannedStreamsPerReplica,
		ReplicasForLoad:          float64(w.PeakStreams) / float64(w.PlannedStreamsPerReplica),
		ReplicasForLoadRoundedUp: forLoad,
		SpareReplicas:            w.SpareReplicas,
		MinReplicas:              w.MinReplicas,
		MaxReplicas:              w.MaxReplicas,
		Replicas:                 n,
		GPUsPerReplica:           w.Deployment.TP,
		GPUs:                     n * w.Deployment.TP,
	}
}

// VLLMFlagsFor is the engine flags of a workload. --max-model-len is the
// longest context allowed, --gpu-memory-utilization and
// --tensor-parallel-size are the deployment's. --max-num-seqs is
// min(⌊factor × planned⌋, streams that fit at the typical context): up to
// factor times the planned batch may run, to absorb a burst while replicas
// are added, but never more than the KV cache holds at the typical context,
// so a full batch of typical requests does not preempt. The reference workload's 8B:
// min(2 × 32, 90) = 64, its own flag. The cap is the typical context, not
// max-model-len: vLLM allocates KV blocks as tokens arrive, not
// max-model-len per sequence, and at 8k the 8B holds only 22 — below the 32
// streams it is planned to run. Validate ensures the result is at least the
// planned streams.
func VLLMFlagsFor(w Workload) VLLMFlags {
	d := w.Deployment
	burst := int64(math.Floor(w.MaxNumSeqsFactor * float64(w.PlannedStreamsPerReplica)))
	return VLLMFlags{
		MaxModelLen:          w.MaxModelLen,
		MaxNumSeqs:           min(burst, d.KVCapacityTokens()/w.ContextTokens),
		GPUMemoryUtilization: d.GPUMemoryUtilization,
		TensorParallelSize:   d.TP,
	}
}

// Args is the flags as vLLM command-line arguments.
func (f VLLMFlags) Args() []string {
	return []string{
		"--max-model-len", fmt.Sprint(f.MaxModelLen),
		"--max-num-seqs", fmt.Sprint(f.MaxNumSeqs),
		"--gpu-memory-utilization", fmt.Sprint(f.GPUMemoryUtilization),
		"--tensor-parallel-size", fmt.Sprint(f.TensorParallelSize),
	}
}
