package twin

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/llmplat/llmplat/runtime/loadgen"
)

// TTFTOf is the series of the time to first token of model's load
// requests (AddLoad), in real-world seconds: at each sample, the
// q-quantile of those whose first token came within window before it; 0
// where none did. It reads the requests recorded when first drawn.
func (tl *Timeline) TTFTOf(model string, q float64, window time.Duration) Series {
	var (
		once  sync.Once
		first []time.Duration // first-token times, sorted
		ttft  []time.Duration // in the same order
	)
	load := func() {
		reqs := tl.Load()
		sort.Slice(reqs, func(i, j int) bool { return reqs[i].FirstToken < reqs[j].FirstToken })
		for _, r := range reqs {
			if r.Model == model && r.FirstToken > 0 {
				first = append(first, r.FirstToken)
				ttft = append(ttft, r.FirstToken-r.Sent)
			}
		}
	}
	return Series{fmt.Sprintf("%s TTFT p%g (s real)", model, q*100), func(s Sample) float64 {
		once.Do(load)
		lo := sort.Search(len(first), func(i int) bool { return first[i] > s.At-window })
		hi := sort.Search(len(first), func(i int) bool { return first[i] > s.At })
		if lo >= hi {
			return 0
		}
		return tl.c.Real(loadgen.Quantile(slices.Clone(ttft[lo:hi]), q)).Seconds()
	}}
}

// RefusalsOf is the series of model's load requests (AddLoad) answered
// 503 whose answer came within window before each sample. It reads the
// requests recorded when first drawn.
func (tl *Timeline) RefusalsOf(model string, window time.Duration) Series {
	var (
		once  sync.Once
		ended []time.Duration // sorted
	)
	load := func() {
		for _, r := range tl.Load() {
			if r.Model == model && r.Status == http.StatusServiceUnavailable {
				ended = append(ended, r.Ended)
			}
		}
		slices.Sort(ended)
	}
	return Series{model + " refused", func(s Sample) float64 {
		once.Do(load)
		lo := sort.Search(len(ended), func(i int) bool { return ended[i] > s.At-window })
		hi := sort.Search(len(ended), func(i int) bool { return ended[i] > s.At })
		return float64(hi - lo)
	}}
}
