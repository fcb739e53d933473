package costreport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Names in vLLM's /metrics that drift reads.
const (
	// generationTokensMetric is vLLM's counter of generated tokens.
	generationTokensMetric = "vllm:generation_tokens_total"
	// modelNameLabel is vLLM's label for the served model name.
	modelNameLabel = "model_name"
)

// ErrNoEngineSeries is returned for a snapshot without the counter drift
// needs, which is most likely not a vLLM /metrics page.
var ErrNoEngineSeries = errors.New("no " + generationTokensMetric + " series")

// ErrNotCounter is returned when the generation counter is exposed with
// another type.
var ErrNotCounter = errors.New(generationTokensMetric + " is not a counter")

// ErrTooFewSnapshots is returned for fewer than the two snapshots an
// increase needs.
var ErrTooFewSnapshots = errors.New("need two metrics snapshots or more")

// Snapshot is vllm:generation_tokens_total at one moment: per engine series
// (its full label set), the counter's value and its model_name.
type Snapshot map[string]engineCount

// engineCount is one engine's counter in a snapshot.
type engineCount struct {
	model string
	value float64
}

// ParseSnapshot reads a /metrics page in Prometheus's text format: one
// engine's own page, or a fleet's as Prometheus's /federate endpoint gives
// it, where every engine's series carries its instance label.
func ParseSnapshot(r io.Reader) (Snapshot, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	mf, ok := families[generationTokensMetric]
	if !ok || len(mf.GetMetric()) == 0 {
		return nil, ErrNoEngineSeries
	}
	s := Snapshot{}
	for _, m := range mf.GetMetric() {
		var v float64
		switch {
		case m.GetCounter() != nil:
			v = m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			v = m.GetUntyped().GetValue()
		default:
			return nil, fmt.Errorf("parse metrics: %w: %s", ErrNotCounter, mf.GetType())
		}
		s[seriesKey(m.GetLabel())] = engineCount{model: labelValue(m.GetLabel(), modelNameLabel), value: v}
	}
	return s, nil
}

// ReadSnapshot parses the snapshot in the file at path.
func ReadSnapshot(path string) (Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read metrics snapshot: %w", err)
	}
	defer f.Close()
	s, err := ParseSnapshot(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// GenerationIncrease is the tokens generated between snapshots taken in
// time order, per model_name: per engine series, the increase between each
// pair of consecutive snapshots, summed. A counter that went down was reset
// (its engine restarted) and counts its new value, as Prometheus's
// increase() does; a series first seen in a later snapshot counts its value
// (a new engine counts from zero); a series that disappears counts nothing
// after its last snapshot.
func GenerationIncrease(snaps ...Snapshot) map[string]float64 {
	out := map[string]float64{}
	for i := 1; i < len(snaps); i++ {
		for key, end := range snaps[i] {
			inc := end.value
			if start, ok := snaps[i-1][key]; ok && end.value >= start.value {
				inc = end.value - start.value
			}
			out[end.model] += inc
		}
	}
	return out
}

// Snapshots is the engine-token source of /metrics snapshot files, the
// first taken at the window's start, the last at its end, any others in
// between in time order.
type Snapshots struct {
	Paths []string
}

var _ EngineTokenSource = Snapshots{}

// Name implements EngineTokenSource.
func (Snapshots) Name() string { return "/metrics snapshots" }

// GenerationTokens implements EngineTokenSource; the window is the one the
// snapshots were taken at.
func (s Snapshots) GenerationTokens(_ context.Context, _ Window) (map[string]float64, error) {
	if len(s.Paths) < 2 {
		return nil, fmt.Errorf("%w, got %d", ErrTooFewSnapshots, len(s.Paths))
	}
	snaps := make([]Snapshot, 0, len(s.Paths))
	for _, p := range s.Paths {
		snap, err := ReadSnapshot(p)
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, snap)
	}
	return GenerationIncrease(snaps...), nil
}

// seriesKey identifies a series by its labels, in name order.
func seriesKey(labels []*dto.LabelPair) string {
	pairs := make([]string, 0, len(labels))
	for _, l := range labels {
		pairs = append(pairs, l.GetName()+"="+fmt.Sprintf("%q", l.GetValue()))
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

// labelValue returns the value of the label name, or "".
func labelValue(labels []*dto.LabelPair, name string) string {
	for _, l := range labels {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
