package twin

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// productionScrapeInterval is how often production scrapes the engines
// and the platform: the ServiceMonitor's and PodMonitor's interval in
// templates/observability.yaml.tmpl (TestScrapeIntervalMatchesTemplate).
const productionScrapeInterval = 15 * time.Second

// minScrapeInterval floors the scaled interval: Prometheus scrapes in
// whole milliseconds, but below a second its own scrape and the targets'
// handlers would load the busy 2-core machine more than they inform.
const minScrapeInterval = time.Second

// prometheusReady bounds Prometheus's start: it replays an empty
// write-ahead log and opens a fresh database, seconds on a busy machine.
const prometheusReady = time.Minute

// addonHost is the address in the twin's network namespace where its
// add-ons (Prometheus, KEDA's operator and adapter) listen: the last of
// the platform's /24, above its Services' and pods' addresses. An
// EndpointSlice may point at it, which it may not at a loopback address.
const addonHost = platformNet + "254"

// Prometheus is the twin's Prometheus server: Debian's build (it has no
// Kubernetes discovery), fed its targets through file-based discovery.
type Prometheus struct {
	// URL is the server's base address, for KEDA's prometheus triggers
	// and for queries.
	URL string
	// ScrapeInterval is the scaled interval between two scrapes of a
	// target.
	ScrapeInterval time.Duration
	sdDir          string
}

// Target is one endpoint Prometheus scrapes at /metrics.
type Target struct {
	// Addr is the endpoint's host:port.
	Addr string
	// Labels are added to every series scraped from it (for instance
	// pod and namespace, as the PodMonitor's relabelling would).
	Labels map[string]string
}

// jobName is what SetTargets accepts as a job: a file name of the
// discovery folder.
var jobName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// StartPrometheus starts a Prometheus server that scrapes every target
// SetTargets names, every productionScrapeInterval divided by the
// cluster's time scale (at least minScrapeInterval). Its configuration and
// database are in the cluster's folder; it listens in the twin's network
// namespace and is stopped when the test ends.
func (c *Cluster) StartPrometheus(tb testing.TB) *Prometheus {
	tb.Helper()
	if !requireNetns(tb) {
		return nil
	}
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testenv.Missing(tb, "Prometheus", err.Error(), "install Debian's prometheus package (.ci/run does)")
		return nil
	}
	dir := filepath.Join(c.Dir, "prometheus")
	p := &Prometheus{ScrapeInterval: scaledScrapeInterval(c.Scale), sdDir: filepath.Join(dir, "targets")}
	for _, d := range []string{p.sdDir, filepath.Join(dir, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, prometheusConfig(p.ScrapeInterval, p.sdDir), 0o644); err != nil {
		tb.Fatal(err)
	}
	addr := freeAddr(tb, addonHost)
	p.URL = "http://" + addr
	c.Start(tb, "prometheus", bin, []string{
		"--config.file=" + config,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
	})
	testenv.EventuallyNil(tb, prometheusReady, "Prometheus ready", func() error { return httpOK(context.Background(), p.URL+"/-/ready") })
	return p
}

// scaledScrapeInterval is the production scrape interval at the time
// scale, floored at minScrapeInterval and rounded to the millisecond
// Prometheus reads.
func scaledScrapeInterval(scale float64) time.Duration {
	d := productionScrapeInterval
	if scale > 0 {
		d = time.Duration(float64(d) / scale)
	}
	return max(d.Round(time.Millisecond), minScrapeInterval)
}

// prometheusConfig is one scrape job over every file of the discovery
// folder; each file's targets carry their own job label (SetTargets), so
// a new job needs no reload. The files are re-read when they change, and
// at each interval in case a change notification was missed.
func prometheusConfig(interval time.Duration, sdDir string) []byte {
	ms := strconv.FormatInt(interval.Milliseconds(), 10) + "ms"
	return fmt.Appendf(nil, `global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: twin
    file_sd_configs:
      - files: [%[2]q]
        refresh_interval: %[1]s
`, ms, filepath.Join(sdDir, "*.json"))
}

// SetTargets replaces the targets of job with targets; an empty list
// stops scraping the job. The discovery file is replaced in one rename,
// so Prometheus never reads half of it.
func (p *Prometheus) SetTargets(job string, targets []Target) error {
	if !jobName.MatchString(job) {
		return fmt.Errorf("prometheus: job %q is not a plain name", job)
	}
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	groups := make([]group, 0, len(targets))
	for _, t := range targets {
		if _, _, err := net.SplitHostPort(t.Addr); err != nil {
			return fmt.Errorf("prometheus: target %q: %w", t.Addr, err)
		}
		labels := map[string]string{"job": job}
		for k, v := range t.Labels {
			if k == "job" {
				return fmt.Errorf("prometheus: target %s: the job label is the job's name", t.Addr)
			}
			labels[k] = v
		}
		groups = append(groups, group{Targets: []string{t.Addr}, Labels: labels})
	}
	raw, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(p.sdDir, "."+job+"-*.tmp") // outside the *.json glob
	if err != nil {
		return fmt.Errorf("prometheus: targets of %s: %w", job, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return fmt.Errorf("prometheus: targets of %s: %w", job, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("prometheus: targets of %s: %w", job, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(p.sdDir, job+".json")); err != nil {
		return fmt.Errorf("prometheus: targets of %s: %w", job, err)
	}
	return nil
}

// Query evaluates expr now and returns its value: the sum of the vector's
// samples, and whether the vector had any (an absent series is not 0).
func (p *Prometheus) Query(ctx context.Context, expr string) (float64, bool, error) {
	client, err := promapi.NewClient(promapi.Config{Address: p.URL})
	if err != nil {
		return 0, false, err
	}
	v, _, _, err := promv1.NewAPI(client).Query(ctx, expr, time.Now())
	if err != nil {
		return 0, false, fmt.Errorf("prometheus: query %s: %w", expr, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return 0, false, fmt.Errorf("prometheus: query %s: a %s, not a vector", expr, v.Type())
	}
	var sum float64
	for _, s := range vec {
		sum += float64(s.Value)
	}
	return sum, len(vec) > 0, nil
}
