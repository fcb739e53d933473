package capacity

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes r as indented JSON; field names carry their units.
func WriteJSON(w io.Writer, r Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write plan json: %w", err)
	}
	return nil
}

// WriteTable writes r for a person: a summary line, then the sections per
// model (KV cache, streams, vLLM flags), fleet, cost and queue budget, and
// any warnings. Ratios are shown as docs/requirements.md states them, to two
// significant figures; JSON carries them unrounded.
func WriteTable(w io.Writer, r Result) error {
	ew := &errWriter{w: w}
	c := r.Cost
	ew.printf("Capacity plan: %d GPUs at peak (%d on-premises, %d cloud), %s USD/hour at peak, %s USD/month\n",
		r.Fleet.GPUsAtPeak, r.Fleet.OnPremGPUs, r.Fleet.CloudGPUs,
		fmt.Sprintf("%.2f", c.CostPerHourPeakUSD), thousands(int64(math.Round(c.CostPerMonthUSD))))
	writeModels(ew, r.Models)
	writeFleet(ew, r)
	writeCost(ew, r)
	writeQueue(ew, r.Models)
	writeQuota(ew, r.Quota)
	writeIdle(ew, r.Idle)
	writeWarnings(ew, r.Models)
	if ew.err != nil {
		return fmt.Errorf("write plan table: %w", ew.err)
	}
	return nil
}

// errWriter keeps the first write error so the renderers stay flat.
type errWriter struct {
	w   io.Writer
	err error
}

// Write passes p on until the first error, then drops it.
func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, nil
}

// printf formats into e.
func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }

// table writes rows of cells aligned in columns, two spaces apart.
func table(w io.Writer, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(tw, "  "+strings.Join(row, "\t"))
	}
	tw.Flush()
}

// perModel builds a row: a label, then one cell per model.
func perModel(label string, ms []ModelPlan, cell func(ModelPlan) string) []string {
	row := []string{label}
	for _, m := range ms {
		row = append(row, cell(m))
	}
	return row
}

// writeModels is the per-model section: memory, streams and flags.
func writeModels(w *errWriter, ms []ModelPlan) {
	w.printf("\nKV cache, streams and vLLM flags (one replica)\n")
	head := perModel("", ms, func(m ModelPlan) string { return m.Model })
	rows := [][]string{head,
		perModel("GPUs", ms, func(m ModelPlan) string { return fmt.Sprintf("%d × %s", m.Memory.TensorParallelSize, m.GPU) }),
		perModel("KV cache per token", ms, func(m ModelPlan) string {
			return fmt.Sprintf("%s B (%s)", thousands(int64(m.Memory.KVBytesPerToken)), bytesHuman(m.Memory.KVBytesPerToken))
		}),
		perModel("context (tokens)", ms, func(m ModelPlan) string { return thousands(m.Memory.ContextTokens) }),
		perModel("KV at context", ms, func(m ModelPlan) string { return bytesHuman(m.Memory.KVBytesAtContext) }),
		perModel("max-model-len (tokens)", ms, func(m ModelPlan) string { return thousands(m.Memory.MaxModelLenTokens) }),
		perModel("KV at max-model-len", ms, func(m ModelPlan) string { return bytesHuman(m.Memory.KVBytesAtMaxModelLen) }),
		perModel("GPU memory", ms, func(m ModelPlan) string { return bytesHuman(m.Memory.GPUMemoryBytes) }),
		perModel("usable (× utilization × TP)", ms, func(m ModelPlan) string { return bytesHuman(m.Memory.UsableBytesPerReplica) }),
		perModel("weights", ms, func(m ModelPlan) string { return bytesHuman(m.Memory.WeightBytes) }),
		perModel("activations (× TP)", ms, func(m ModelPlan) string {
			return bytesHuman(m.Memory.ActivationBytesPerGPU * float64(m.Memory.TensorParallelSize))
		}),
		perModel("KV cache", ms, func(m ModelPlan) string { return bytesHuman(m.Memory.KVCacheBytesPerReplica) }),
		perModel("KV capacity (tokens)", ms, func(m ModelPlan) string { return thousands(m.Memory.KVCapacityTokensPerReplica) }),
		perModel("streams at context", ms, func(m ModelPlan) string { return thousands(m.Memory.StreamsAtContext) }),
		perModel("streams at max-model-len", ms, func(m ModelPlan) string { return thousands(m.Memory.StreamsAtMaxModelLen) }),
		perModel("fewest GPUs that fit", ms, func(m ModelPlan) string { return fmt.Sprint(m.Memory.MinTensorParallelSize) }),
		perModel("--max-model-len", ms, func(m ModelPlan) string { return fmt.Sprint(m.Flags.MaxModelLen) }),
		perModel("--max-num-seqs", ms, func(m ModelPlan) string { return fmt.Sprint(m.Flags.MaxNumSeqs) }),
		perModel("--gpu-memory-utilization", ms, func(m ModelPlan) string { return fmt.Sprint(m.Flags.GPUMemoryUtilization) }),
		perModel("--tensor-parallel-size", ms, func(m ModelPlan) string { return fmt.Sprint(m.Flags.TensorParallelSize) }),
	}
	table(w, rows)
}

// writeFleet is the replicas per model and the GPUs per kind.
func writeFleet(w *errWriter, r Result) {
	w.printf("\nFleet at peak\n")
	rows := [][]string{{"model", "peak streams", "per replica", "for load", "spare", "floor", "replicas", "GPUs"}}
	for _, m := range r.Models {
		p := m.Replicas
		rows = append(rows, []string{m.Model, fmt.Sprint(p.PeakStreams), fmt.Sprint(p.PlannedStreamsPerReplica),
			fmt.Sprintf("%s → %d", approx(p.ReplicasForLoad), p.ReplicasForLoadRoundedUp),
			fmt.Sprintf("+%d", p.SpareReplicas), fmt.Sprint(p.MinReplicas), fmt.Sprint(p.Replicas),
			fmt.Sprintf("%d (%d × %d)", p.GPUs, p.Replicas, p.GPUsPerReplica)})
	}
	table(w, rows)
	w.printf("\n")
	rows = [][]string{{"GPU", "at peak", "on-premises used", "owned", "cloud"}}
	for _, k := range r.Fleet.ByGPU {
		rows = append(rows, []string{k.GPU, fmt.Sprint(k.GPUsAtPeak), fmt.Sprint(k.OnPremUsed),
			fmt.Sprint(k.OnPremAvailable), fmt.Sprint(k.CloudGPUs)})
	}
	rows = append(rows, []string{"total", fmt.Sprint(r.Fleet.GPUsAtPeak), fmt.Sprint(r.Fleet.OnPremGPUs), "", fmt.Sprint(r.Fleet.CloudGPUs)})
	table(w, rows)
}

// writeCost is the cloud bill and the cost per million tokens.
func writeCost(w *errWriter, r Result) {
	c := r.Cost
	w.printf("\nCost (cloud GPUs only)\n")
	var parts []string
	for _, k := range r.Fleet.ByGPU {
		if k.CloudGPUs > 0 {
			parts = append(parts, fmt.Sprintf("%d %s × %.2f USD", k.CloudGPUs, k.GPU, k.PricePerHourUSD))
		}
	}
	if len(parts) == 0 {
		parts = []string{"no cloud GPU"}
	}
	budget := ""
	if c.MonthlyBudgetUSD > 0 {
		verdict := "within"
		if !c.WithinBudget {
			verdict = "OVER"
		}
		budget = fmt.Sprintf(" (target %s: %s)", thousands(int64(math.Round(c.MonthlyBudgetUSD))), verdict)
	}
	avg := fmt.Sprintf("%g cloud GPUs on average", c.AverageCloudGPUs)
	if c.AverageSource == AveragePeak {
		avg = fmt.Sprintf("%g cloud GPUs (no average given: the peak)", c.AverageCloudGPUs)
	}
	table(w, [][]string{
		{"per hour at peak", fmt.Sprintf("%s = %.2f USD", strings.Join(parts, " + "), c.CostPerHourPeakUSD)},
		{"per month", fmt.Sprintf("%s × %.2f USD × %g h = %s USD%s", avg, c.PricePerGPUHourUSD, c.HoursPerMonth,
			thousands(int64(math.Round(c.CostPerMonthUSD))), budget)},
	})
	w.printf("\n")
	rows := [][]string{{"model", "tokens/s per replica", "derived estimate", "M tokens/hour", "USD/hour per replica",
		"USD per M tokens", "at utilisation"}}
	for _, m := range r.Models {
		t := m.Throughput
		rows = append(rows, []string{m.Model,
			fmt.Sprintf("%s (%s)", thousands(int64(math.Round(t.ReplicaTokensPerSecond))), t.Source),
			thousands(int64(math.Round(t.DerivedReplicaTokensPerSecond))),
			strconv.FormatFloat(RoundTo(t.ReplicaMillionTokensPerHour, 2), 'f', -1, 64),
			fmt.Sprintf("%.2f", t.ReplicaCostPerHourUSD),
			approx(t.CostPerMillionFullLoadUSD),
			fmt.Sprintf("%s at %g %%", approx(t.CostPerMillionAtUtilisationUSD), RoundTo(t.Utilisation*100, 1))})
	}
	table(w, rows)
}

// writeQueue is the queue budget per model.
func writeQueue(w *errWriter, ms []ModelPlan) {
	if len(ms) == 0 {
		return
	}
	w.printf("\nQueue budget (%g s queue limit)\n", ms[0].Queue.QueueLimitSeconds)
	rows := [][]string{{"model", "answer tokens", "tokens/s per stream", "s per answer", "requests/s per replica",
		"burst per replica", "burst at peak"}}
	for _, m := range ms {
		q := m.Queue
		rows = append(rows, []string{m.Model, thousands(q.AnswerTokens), approx(m.Throughput.StreamTokensPerSecond),
			approx(q.SecondsPerAnswer), approx(q.RequestsPerSecondPerReplica),
			burstCell(q.BurstRequestsPerReplica),
			thousands(q.BurstRequestsAtPeak)})
	}
	table(w, rows)
}

// writeWarnings lists the plan's warnings, if any.
func writeWarnings(w *errWriter, ms []ModelPlan) {
	var lines []string
	for _, m := range ms {
		for _, warn := range m.Warnings {
			lines = append(lines, fmt.Sprintf("  %s: %s\n", m.Model, warn))
		}
	}
	if len(lines) == 0 {
		return
	}
	w.printf("\nWarnings\n%s", strings.Join(lines, ""))
}

// burstCell is a whole count of requests, with the two-figure
// rounding beside it when that differs (112 is "about 110").
func burstCell(n int64) string {
	if a := approx(float64(n)); a != strconv.FormatInt(n, 10) {
		return fmt.Sprintf("%d (≈ %s)", n, a)
	}
	return strconv.FormatInt(n, 10)
}
