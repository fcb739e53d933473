package twin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/llmplat/llmplat/runtime/clusterwatch"
)

// simFlags are the vLLM flags of the rendered engine container that the
// sim takes under the same name. --model and --port are read apart; any
// other flag is an error, so a template that grows a flag the sim cannot
// play is noticed.
var simFlags = map[string]bool{
	"served-model-name": true, "max-model-len": true, "max-num-seqs": true,
	"tensor-parallel-size": true, "gpu-memory-utilization": true, "max-num-batched-tokens": true,
}

// container is the pod's engine container, or nil.
func container(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == engineContainer {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// simArgs are the model of pod's engine and the `llmplat sim` flags that
// play it, but its load time: its vLLM flags translated, bound to the
// pod's address, at the twin's time scale.
func (e *Engines) simArgs(pod *corev1.Pod) (string, []string, error) {
	ctr := container(pod)
	if ctr == nil {
		return "", nil, fmt.Errorf("no container %q", engineContainer)
	}
	model := pod.Labels[clusterwatch.ModelLabel]
	args := []string{"--host=" + pod.Status.PodIP, "--port=" + strconv.Itoa(EnginePort)}
	for _, a := range append(slicesClone(ctr.Command), ctr.Args...) {
		k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			return "", nil, fmt.Errorf("engine argument %q: want --flag=value", a)
		}
		switch {
		case k == "model":
			// /models/<name>/<revision>: the cache path of the model.
			if parts := strings.Split(strings.Trim(v, "/"), "/"); len(parts) == 3 && parts[0] == "models" {
				model = parts[1]
			}
		case k == "port":
			if v != strconv.Itoa(EnginePort) {
				return "", nil, fmt.Errorf("engine port %s: the twin serves engines on %d", v, EnginePort)
			}
		case simFlags[k]:
			args = append(args, a)
		default:
			return "", nil, fmt.Errorf("engine flag --%s has no counterpart in the sim", k)
		}
	}
	if model == "" {
		return "", nil, errors.New("no model: neither a llmplat.io/model label nor --model=/models/<name>/<revision>")
	}
	return model, append(args, "--model="+model, "--time-scale="+strconv.FormatFloat(e.c.Scale, 'g', -1, 64)), nil
}

// loadTime is model's real-world load time: EngineOptions.LoadTime, or
// the expected load its Service announces (on the twin's clock, as
// Substitutions scale it) in real-world time, less
// EngineOptions.NodeLaunch.
func (e *Engines) loadTime(namespace, model string) (time.Duration, error) {
	if e.opts.LoadTime != nil {
		if d, ok := e.opts.LoadTime(model); ok {
			return d, nil
		}
	}
	svcs, err := e.svcs.Services(namespace).List(labels.SelectorFromSet(labels.Set{clusterwatch.ModelLabel: model}))
	if err != nil {
		return 0, err
	}
	for _, s := range svcs {
		spec, ok := s.Annotations[clusterwatch.ModelSpecAnnotation]
		if !ok {
			continue
		}
		_, load, err := clusterwatch.ParseModelSpec(spec)
		if err != nil {
			return 0, fmt.Errorf("service %s: %w", s.Name, err)
		}
		return max(e.c.Real(load)-e.opts.NodeLaunch, 0), nil
	}
	return 0, fmt.Errorf("model %s: no Service in %s announces its expected load (%s)", model, namespace, clusterwatch.ModelSpecAnnotation)
}

// splitLoad splits a real-world load time into the part before the
// engine's container starts (image pull, the init containers' weight
// sync: the backer holds the process back) and the engine's own load
// (the sim's --load-time, during which /health answers 503). The engine's
// part is what the startup probe was sized for, which allows the load
// twice over: half its budget, at most the whole load. So a load the
// rendered probe admits in production never fails it in the twin, and the
// pod is Ready after the whole load either way.
func splitLoad(ctr *corev1.Container, total time.Duration) (hold, load time.Duration) {
	p := ctr.StartupProbe
	if p == nil {
		return 0, total
	}
	budget := time.Duration(threshold(p.FailureThreshold, 3)) * time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	load = min(total, budget/2)
	return total - load, load
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// drainScript is what the rendered preStop hook does, in real-world
// durations: sleep settle, then poll the engine's metrics every poll
// until nothing runs or waits, for at most deadline from its start.
type drainScript struct{ settle, poll, deadline time.Duration }

var (
	drainDeadline = regexp.MustCompile(`deadline = time\.time\(\) \+ (\d+)`)
	drainSleep    = regexp.MustCompile(`time\.sleep\((\d+)\)`)
)

// preStopDrain reads the container's preStop drain (templates/
// model.yaml.tmpl), nil when it has no preStop. A preStop of another
// shape is an error: the twin would not know what to play.
func preStopDrain(ctr *corev1.Container) (*drainScript, error) {
	if ctr.Lifecycle == nil || ctr.Lifecycle.PreStop == nil {
		return nil, nil
	}
	ex := ctr.Lifecycle.PreStop.Exec
	if ex == nil || len(ex.Command) == 0 {
		return nil, errors.New("preStop: only the rendered exec drain is played")
	}
	script := ex.Command[len(ex.Command)-1]
	dl, sleeps := drainDeadline.FindStringSubmatch(script), drainSleep.FindAllStringSubmatch(script, -1)
	if dl == nil || len(sleeps) != 2 || !strings.Contains(script, "/metrics") || !strings.Contains(script, "vllm:num_requests_") {
		return nil, fmt.Errorf("preStop: not the rendered drain (a deadline, a settle sleep, a metrics poll): %q", script)
	}
	sec := func(s string) time.Duration { n, _ := strconv.Atoi(s); return time.Duration(n) * time.Second }
	return &drainScript{deadline: sec(dl[1]), settle: sec(sleeps[0][1]), poll: sec(sleeps[1][1])}, nil
}

// busyLine matches the engine's gauges of running and waiting requests,
// as the rendered drain reads them.
var busyLine = regexp.MustCompile(`(?m)^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})? (\S+)$`)

// metricsTimeout bounds one read of an engine's metrics (the drain's 5 s).
const metricsTimeout = 5 * time.Second

// busyRequests is the sum of the engine's running and waiting requests.
func busyRequests(g *engine) (int, error) { return BusyRequests(g.addr()) }

// BusyRequests is the sum of the running and waiting requests of the
// engine at addr (host:port), from its metrics as the rendered drain
// reads them.
func BusyRequests(addr string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), metricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := engineHTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return 0, err
	}
	var n float64
	for _, m := range busyLine.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics: %q: %w", m[0], err)
		}
		n += v
	}
	return int(n), nil
}

// maxMetricsBytes bounds an engine's metrics page: the sim's is a few KiB.
const maxMetricsBytes = 4 << 20

// isGone reports whether err says the pod no longer exists (or is
// another pod by now).
func isGone(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsConflict(err) }
