package nodeagent

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strconv"
	"time"
)

// GPU telemetry through nvidia-smi, which ships with the NVIDIA driver.
const (
	// gpuTool is the driver's command-line tool.
	gpuTool = "nvidia-smi"
	// gpuQueryTimeout bounds one query: nvidia-smi answers in well under a
	// second, and a hung driver must not hold a beat back past the engine
	// scrape's own 2 s.
	gpuQueryTimeout = 2 * time.Second
	// gpuWaitDelay bounds the wait for the tool's output after it is
	// killed, in case a child of it still holds the pipe.
	gpuWaitDelay = time.Second
)

// gpuQueryArgs ask for each GPU's busy percentage, one bare number a line.
var gpuQueryArgs = []string{"--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"}

// nvidiaSMI returns a GPUQuery running nvidia-smi, or nil when it is not
// on the PATH (a machine without NVIDIA GPUs, or a simulated engine).
func nvidiaSMI() func(context.Context) ([]byte, error) {
	path, err := exec.LookPath(gpuTool)
	if err != nil {
		return nil
	}
	return func(ctx context.Context) ([]byte, error) {
		cmd := exec.CommandContext(ctx, path, gpuQueryArgs...)
		cmd.WaitDelay = gpuWaitDelay
		return cmd.Output()
	}
}

// gpuUtil runs the configured query and returns the average utilisation
// of the node's GPUs as a fraction, or nil when unknown.
func (a *Agent) gpuUtil(ctx context.Context) *float64 {
	if a.cfg.GPUQuery == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, gpuQueryTimeout)
	defer cancel()
	out, err := a.cfg.GPUQuery(ctx)
	if err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) { // not the session ending
			a.cfg.Logger.Warn("query gpu utilisation", "err", err)
		}
		return nil
	}
	return parseGPUUtil(out)
}

// parseGPUUtil averages the percentages of nvidia-smi's output, one GPU a
// line, into a fraction in [0, 1]. Lines that are not numbers ("[N/A]" on
// GPUs that do not report it) are skipped; nil means none was a number.
func parseGPUUtil(out []byte) *float64 {
	var sum float64
	n := 0
	for line := range bytes.Lines(out) {
		v, err := strconv.ParseFloat(string(bytes.TrimSpace(line)), 64)
		if err != nil || v != v { // not a number, or NaN
			continue
		}
		sum += min(max(v, 0), 100)
		n++
	}
	if n == 0 {
		return nil
	}
	f := sum / float64(n) / 100
	return &f
}
