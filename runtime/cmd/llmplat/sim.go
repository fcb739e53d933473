package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/enginesim"
)

func init() { register("sim", "run the vLLM-compatible engine simulator", runSim) }

// simFlags are the sim subcommand's flags, named after vLLM's where vLLM
// has one.
type simFlags struct {
	model, served, host                   string
	port                                  int
	maxModelLen, maxBatched, meanAnswer   int64
	maxNumSeqs, tp                        int
	gpuMemUtil, timeScale                 float64
	seed                                  int64
	loadTime                              time.Duration
	params, weightBytes, kvBytes          float64
	layers, kvHeads, headDim              int
	gpuName                               string
	gpuMemGiB, gpuBandwidthGBs, gpuTFLOPS float64
	faults                                enginesim.Faults
	slowStart                             time.Duration
}

func (f *simFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "model", enginesim.DefaultProfile, "built-in profile ("+strings.Join(enginesim.ProfileNames(), ", ")+
		") or the name of a custom model described by --params, --layers, --kv-heads, --head-dim, --weight-bytes and --kv-bytes")
	fs.StringVar(&f.served, "served-model-name", "", "model name clients ask for (default: the profile's served name, or --model)")
	fs.StringVar(&f.host, "host", "127.0.0.1", "address to listen on")
	fs.IntVar(&f.port, "port", 8000, "port to listen on (0 picks a free one)")
	fs.Int64Var(&f.maxModelLen, "max-model-len", enginesim.DefaultMaxModelLen, "longest context (prompt plus answer) accepted")
	fs.IntVar(&f.maxNumSeqs, "max-num-seqs", enginesim.DefaultMaxNumSeqs, "most sequences running at once")
	fs.Int64Var(&f.maxBatched, "max-num-batched-tokens", enginesim.DefaultMaxNumBatchedTokens, "prompt tokens one step prefills")
	fs.Float64Var(&f.gpuMemUtil, "gpu-memory-utilization", 0, "share of GPU memory the engine takes (default: the profile's, 0.9)")
	fs.IntVar(&f.tp, "tensor-parallel-size", 0, "GPUs per replica (default: the profile's)")
	fs.Float64Var(&f.timeScale, "time-scale", enginesim.DefaultTimeScale, "run this many times faster than real time")
	fs.Int64Var(&f.seed, "seed", 0, "seed of generated text and injected errors")
	fs.DurationVar(&f.loadTime, "load-time", 0, "simulated model load time during which /health answers 503")
	fs.Int64Var(&f.meanAnswer, "mean-answer-tokens", enginesim.DefaultMeanAnswerTokens, "mean natural answer length")
	fs.Float64Var(&f.params, "params", 0, "custom model: parameters (8.03e9)")
	fs.IntVar(&f.layers, "layers", 0, "custom model: layers")
	fs.IntVar(&f.kvHeads, "kv-heads", 0, "custom model: key-value heads")
	fs.IntVar(&f.headDim, "head-dim", 0, "custom model: head size")
	fs.Float64Var(&f.weightBytes, "weight-bytes", 0, "custom model: bytes per weight (2 for BF16, 1 for FP8)")
	fs.Float64Var(&f.kvBytes, "kv-bytes", 0, "custom model: bytes per KV element (2 for FP16)")
	fs.StringVar(&f.gpuName, "gpu-name", "", "custom GPU: name")
	fs.Float64Var(&f.gpuMemGiB, "gpu-memory-gib", 0, "custom GPU: usable memory in GiB")
	fs.Float64Var(&f.gpuBandwidthGBs, "gpu-bandwidth-gbs", 0, "custom GPU: memory bandwidth in GB/s")
	fs.Float64Var(&f.gpuTFLOPS, "gpu-tflops", 0, "custom GPU: dense 16-bit TFLOPS")
	fs.Float64Var(&f.faults.ErrorRate, "fault-error-rate", 0, "fraction of requests answered 500")
	fs.Int64Var(&f.faults.DieAfterTokens, "fault-die-after-tokens", 0, "kill the engine when a stream has sent this many tokens (0: never)")
	fs.BoolVar(&f.faults.Hang, "fault-hang", false, "accept requests and never answer")
	fs.DurationVar(&f.slowStart, "fault-slow-start", 0, "extra simulated delay before the first token")
}

// deployment returns the profile named by --model, or a custom model,
// with every hardware flag that was set applied.
func (f *simFlags) deployment(set map[string]bool) (capacity.Deployment, error) {
	d, err := enginesim.Profile(f.model)
	if errors.Is(err, enginesim.ErrUnknownProfile) {
		d, err = capacity.Deployment{Model: capacity.Model{Name: f.model, ServedName: f.model}, GPU: capacity.L40S}.WithDefaults(), nil
	}
	if err != nil {
		return d, err
	}
	apply := []struct {
		flag string
		do   func()
	}{
		{"params", func() { d.Model.Params = f.params }},
		{"layers", func() { d.Model.Layers = f.layers }},
		{"kv-heads", func() { d.Model.KVHeads = f.kvHeads }},
		{"head-dim", func() { d.Model.HeadDim = f.headDim }},
		{"weight-bytes", func() { d.Model.WeightBytes = f.weightBytes }},
		{"kv-bytes", func() { d.Model.KVBytes = f.kvBytes }},
		{"gpu-name", func() { d.GPU.Name = f.gpuName }},
		{"gpu-memory-gib", func() { d.GPU.MemoryBytes = f.gpuMemGiB * capacity.GiB }},
		{"gpu-bandwidth-gbs", func() { d.GPU.BandwidthBytesPerSec = f.gpuBandwidthGBs * capacity.GB }},
		{"gpu-tflops", func() { d.GPU.FLOPS = f.gpuTFLOPS * 1e12 }},
		{"tensor-parallel-size", func() { d.TP = f.tp }},
		{"gpu-memory-utilization", func() { d.GPUMemoryUtilization = f.gpuMemUtil }},
	}
	for _, a := range apply {
		if set[a.flag] {
			a.do()
		}
	}
	return d, nil
}

func runSim(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("sim")
	var f simFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	dep, err := f.deployment(set)
	if err != nil {
		return err
	}
	f.faults.SlowStart = enginesim.Duration(f.slowStart)
	sim, err := enginesim.New(enginesim.Config{
		Deployment:          dep,
		ServedModelName:     f.served,
		MaxModelLen:         f.maxModelLen,
		MaxNumSeqs:          f.maxNumSeqs,
		MaxNumBatchedTokens: f.maxBatched,
		MeanAnswerTokens:    f.meanAnswer,
		Seed:                f.seed,
		LoadTime:            f.loadTime,
		Faults:              f.faults,
		TimeScale:           f.timeScale,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Fprintf(stdout, "llmplat sim: serving %s on http://%s (%s, %d KV blocks, time scale %g)\n",
		sim.ServedModelName(), ln.Addr(), dep.Model.Name, dep.WithDefaults().KVCapacityBlocks(), f.timeScale)
	return sim.Serve(ctx, ln)
}
