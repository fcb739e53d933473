package twin

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/llmplat/llmplat/runtime/loadgen"
)

// driven is a load test running against the twin's platform.
type driven struct {
	done   chan struct{}
	client *http.Client
	report loadgen.Report
	err    error

	mu       sync.Mutex
	finished []loadgen.Finished
}

// drive starts the load test p against the platform, with the twin's key;
// each request is recorded on the timeline as it ends (AddLoad) and kept.
func (r *twinRun) drive(ctx context.Context, p loadgen.Plan) *driven {
	d := &driven{done: make(chan struct{}), client: loadgen.NewClient()}
	p.BaseURL, p.Key, p.Client = r.p.URL, r.key, d.client
	p.OnDone = func(f loadgen.Finished) {
		r.tl.AddLoad(r.request(f))
		d.mu.Lock()
		d.finished = append(d.finished, f)
		d.mu.Unlock()
	}
	go func() {
		defer close(d.done)
		d.report, d.err = loadgen.Load(ctx, p)
		d.client.CloseIdleConnections()
	}()
	return d
}

// wait waits for the load test's end and returns its report.
func (d *driven) wait() (loadgen.Report, error) {
	<-d.done
	return d.report, d.err
}

// Finished returns the requests that have ended so far.
func (d *driven) Finished() []loadgen.Finished {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]loadgen.Finished(nil), d.finished...)
}

// request is a load test's request as the timeline records it.
func (r *twinRun) request(f loadgen.Finished) Request {
	q := Request{Model: f.Model, Sent: r.tl.At(f.Sent), Ended: r.tl.At(f.Ended), Status: http.StatusOK, Attempts: 1}
	if !f.FirstToken.IsZero() {
		q.FirstToken = r.tl.At(f.FirstToken)
	}
	var refused *loadgen.StatusError
	switch {
	case errors.As(f.Err, &refused):
		q.Status, q.Err = refused.Status, string(refused.Body)
	case f.Err != nil:
		q.Err = f.Err.Error()
		if q.FirstToken == 0 {
			q.Status = 0
		}
	}
	return q
}
