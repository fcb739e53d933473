package twin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/templates"
)

// scrapeWait bounds the wait for a change of targets to show in a query:
// the discovery file is re-read, the target scraped, a few intervals on a
// busy machine.
const scrapeWait = time.Minute

func TestScaledScrapeInterval(t *testing.T) {
	for _, tc := range []struct {
		name  string
		scale float64
		want  time.Duration
	}{
		{"real time", 1, 15 * time.Second},
		{"unset scale is real time", 0, 15 * time.Second},
		{"scaled", 10, 1500 * time.Millisecond},
		{"floored", 60, time.Second},
		{"rounded to the millisecond", 7, 2143 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := scaledScrapeInterval(tc.scale); got != tc.want {
				t.Errorf("scaledScrapeInterval(%v) = %v, want %v", tc.scale, got, tc.want)
			}
		})
	}
}

// TestScrapeIntervalMatchesTemplate keeps productionScrapeInterval the
// interval production's monitors scrape at.
func TestScrapeIntervalMatchesTemplate(t *testing.T) {
	raw, err := fs.ReadFile(templates.FS, "observability.yaml.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	found := regexp.MustCompile(`(?m)^\s+interval: (\S+)$`).FindAllSubmatch(raw, -1)
	if len(found) == 0 {
		t.Fatal("observability.yaml.tmpl names no scrape interval")
	}
	for _, m := range found {
		got, err := time.ParseDuration(string(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		if got != productionScrapeInterval {
			t.Errorf("observability.yaml.tmpl scrapes every %v, productionScrapeInterval is %v", got, productionScrapeInterval)
		}
	}
}

func TestAddonHostInPodRange(t *testing.T) {
	if a := netip.MustParseAddr(addonHost); !PodRange.Contains(a) {
		t.Errorf("addonHost %s is outside PodRange %s: nothing routes it in the namespace", a, PodRange)
	}
}

func TestSetTargetsRefusesBadInput(t *testing.T) {
	p := &Prometheus{sdDir: t.TempDir()}
	for _, tc := range []struct {
		name, job string
		targets   []Target
	}{
		{"job with a slash", "a/b", nil},
		{"job with a glob", "*", nil},
		{"address without port", "engines", []Target{{Addr: "10.244.0.5"}}},
		{"job label", "engines", []Target{{Addr: "10.244.0.5:8000", Labels: map[string]string{"job": "x"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.SetTargets(tc.job, tc.targets); err == nil {
				t.Errorf("SetTargets(%q, %v) = nil, want an error", tc.job, tc.targets)
			}
		})
	}
}

// TestPrometheusScrapesEngines serves a simulated engine in the namespace
// and checks that Prometheus scrapes what the rendered ScaledObjects
// query, under the simulator's metric names, and that a job's targets are
// replaced and removed by SetTargets.
func TestPrometheusScrapesEngines(t *testing.T) {
	c := &Cluster{Dir: t.TempDir(), Scale: 15} // no control plane: Prometheus needs none
	p := c.StartPrometheus(t)
	if p == nil {
		return
	}
	engine := serveEngine(t, "llama-8b")
	if err := p.SetTargets("vllm", []Target{{Addr: engine, Labels: map[string]string{"pod": "vllm-llama-8b-0"}}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		demandForecast(t, c, "llama-8b"),
		`sum(vllm:num_requests_waiting{model_name="llama-8b"})`,
		`avg(vllm:kv_cache_usage_perc{model_name="llama-8b"})`,
		`up{job="vllm",pod="vllm-llama-8b-0"}`,
	} {
		waitQuery(t, p, q, func(v float64, ok bool) error {
			if !ok {
				return errors.New("no series")
			}
			return nil
		})
	}
	if err := p.SetTargets("vllm", nil); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, p, `up{job="vllm"}`, func(v float64, ok bool) error {
		if ok {
			return errors.New("the removed target is still scraped")
		}
		return nil
	})
}

// demandForecast is the 8B's demand trigger as the twin applies it on c's
// clock, for an engine serving the model under the name served: what
// Prometheus must evaluate for KEDA.
func demandForecast(t *testing.T, c *Cluster, served string) string {
	t.Helper()
	applied, err := Substitute(Env{Scaler: c}, renderExample(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range applied {
		if o.GetKind() != "ScaledObject" || o.GetName() != "vllm-llama-8b" {
			continue
		}
		triggers, _, _ := unstructured.NestedSlice(o.Object, "spec", "triggers")
		for _, tr := range triggers {
			if q, _, _ := unstructured.NestedString(tr.(map[string]any), "metadata", "query"); strings.Contains(q, "deriv(") {
				return strings.ReplaceAll(q, `model_name="meta-llama/Llama-3.1-8B-Instruct"`, `model_name="`+served+`"`)
			}
		}
	}
	t.Fatal("the 8B's ScaledObject has no demand forecast")
	return ""
}

// waitQuery waits until expr's value satisfies check.
func waitQuery(tb testing.TB, p *Prometheus, expr string, check func(v float64, ok bool) error) {
	tb.Helper()
	testenv.EventuallyNil(tb, scrapeWait, expr, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		v, ok, err := p.Query(ctx, expr)
		if err != nil {
			return err
		}
		if err := check(v, ok); err != nil {
			return fmt.Errorf("%v (value %v, present %v)", err, v, ok)
		}
		return nil
	})
}

// serveInNamespace serves h on the add-ons' address in the twin's
// namespace until the test ends, and returns its host:port.
func serveInNamespace(tb testing.TB, h http.Handler) string {
	tb.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addonHost, "0"))
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	tb.Cleanup(func() { _ = srv.Close(); <-done })
	return l.Addr().String()
}
