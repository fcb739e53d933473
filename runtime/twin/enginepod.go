package twin

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Kubelet's defaults the backer plays where the pod leaves them unset,
// and its own bounds.
const (
	// defaultProbeTimeout is a probe's timeoutSeconds when unset (1 s).
	// Probe timeouts are not scaled: they bound an HTTP call on a shared
	// machine, not a span of the simulated world.
	defaultProbeTimeout = time.Second
	// defaultGrace is the API server's terminationGracePeriodSeconds for
	// a pod that sets none, should a deleted pod carry no grace.
	defaultGrace = 30 * time.Second
	// killAfterPreStop is kubelet's last wait for SIGTERM to work when a
	// preStop hook has used the whole grace period (2 s, scaled).
	killAfterPreStop = 2 * time.Second
	// minTwinWait floors a scaled wait, so that a large scale never turns
	// a probe period into a busy loop.
	minTwinWait = 20 * time.Millisecond
	// apiCallTimeout bounds one status or metadata patch of a pod.
	apiCallTimeout = 30 * time.Second
)

// engineHTTP probes engines and reads their metrics; no connection is
// kept, so a stopped engine leaves nothing open.
var engineHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// startProcess runs the sim for g with args; g.done closes when it exits.
func (e *Engines) startProcess(g *engine, args []string) error {
	log, err := os.Create(filepath.Join(e.c.Dir, fmt.Sprintf("sim-%s-%s.log", g.name, string(g.uid)[:8])))
	if err != nil {
		return err
	}
	cmd := exec.Command(e.bin, append([]string{"sim"}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("start sim: %w", err)
	}
	e.mu.Lock()
	g.cmd = cmd
	e.mu.Unlock()
	e.wg.Go(func() {
		_ = cmd.Wait()
		_ = log.Close()
		e.mu.Lock()
		e.note(g, func(t *EngineTiming) { t.Exited = time.Now() })
		e.mu.Unlock()
		close(g.done)
	})
	return nil
}

// stopProcess signals g's process group; the first signal counts what the
// engine was running or holding as cut. SIGKILL waits for the end.
func (e *Engines) stopProcess(g *engine, sig syscall.Signal) {
	e.mu.Lock()
	cmd, first := g.cmd, !g.signalled
	g.signalled = true
	e.mu.Unlock()
	if cmd == nil || g.exited() {
		return
	}
	if first {
		if busy, err := busyRequests(g); err == nil {
			e.mu.Lock()
			e.cut += busy
			e.mu.Unlock()
		}
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	if sig == syscall.SIGKILL {
		<-g.done
	}
}

// probe plays the container's startup, then readiness, probe against the
// engine, setting the pod's readiness, until the pod terminates or the
// backer stops.
func (e *Engines) probe(g *engine, pod *corev1.Pod, ctr *corev1.Container) {
	startup, readiness := ctr.StartupProbe, ctr.ReadinessProbe
	started := startup == nil
	var fails, oks int32
	p := readiness
	if !started {
		p = startup
	}
	if p == nil {
		e.setReady(g, pod, true)
		<-g.terminate
		return
	}
	wait := max(e.c.Dur(time.Duration(p.InitialDelaySeconds)*time.Second), minTwinWait)
	for {
		select {
		case <-g.terminate:
			return
		case <-e.ctx.Done():
			return
		case <-time.After(wait):
		}
		ok := httpProbe(g, ctr, p) == nil
		switch {
		case !started && ok:
			started, p, fails, oks = true, readiness, 0, 0
			if p == nil {
				e.setReady(g, pod, true)
				<-g.terminate
				return
			}
			wait = 0 // kubelet probes readiness as soon as the start is seen
			continue
		case !started:
			if fails++; fails == threshold(p.FailureThreshold, 3) {
				e.fail(fmt.Errorf("pod %s: startup probe failed %d times: kubelet would restart the engine, which the twin does not play", g.name, fails))
			}
		case ok:
			fails, oks = 0, oks+1
			if oks >= threshold(p.SuccessThreshold, 1) {
				e.setReady(g, pod, true)
			}
		default:
			fails, oks = fails+1, 0
			if fails >= threshold(p.FailureThreshold, 3) {
				e.setReady(g, pod, false)
			}
		}
		wait = max(e.c.Dur(time.Duration(max(p.PeriodSeconds, 1))*time.Second), minTwinWait)
	}
}

// threshold is v, or def when v is unset.
func threshold(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}

// httpProbe is one HTTP GET probe of the engine, as kubelet would make it.
func httpProbe(g *engine, ctr *corev1.Container, p *corev1.Probe) error {
	if p.HTTPGet == nil {
		return fmt.Errorf("only httpGet probes are played")
	}
	port, err := probePort(ctr, p.HTTPGet.Port)
	if err != nil {
		return err
	}
	timeout := defaultProbeTimeout
	if p.TimeoutSeconds > 0 {
		timeout = time.Duration(p.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return httpGetOK(ctx, "http://"+net.JoinHostPort(g.ip, strconv.Itoa(port))+p.HTTPGet.Path)
}

// probePort resolves a probe's port, by number or by the container's
// port name.
func probePort(ctr *corev1.Container, port intstr.IntOrString) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range ctr.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("probe port %q is not a port of container %s", port.StrVal, ctr.Name)
}

// httpGetOK returns nil when url answers a 2xx or 3xx status, as a
// kubelet HTTP probe counts success.
func httpGetOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := engineHTTP.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// setReady sets the pod's Ready and ContainersReady conditions and the
// engine container's ready, as kubelet reports a readiness probe's
// verdict, when they change.
func (e *Engines) setReady(g *engine, pod *corev1.Pod, ready bool) {
	e.mu.Lock()
	same := g.ready == ready && g.readySet
	g.ready, g.readySet = ready, true
	if ready {
		e.note(g, func(t *EngineTiming) {
			if t.Ready.IsZero() {
				t.Ready = time.Now()
			}
		})
	}
	e.mu.Unlock()
	if same {
		return
	}
	status, reason := corev1.ConditionTrue, ""
	if !ready {
		status, reason = corev1.ConditionFalse, "ContainersNotReady"
	}
	now := metav1.Now()
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: now}
	}
	// The UID makes the patch a precondition: never another pod's.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": g.uid}, "status": map[string]any{
		"conditions":        []corev1.PodCondition{cond(corev1.PodReady), cond(corev1.ContainersReady)},
		"containerStatuses": []map[string]any{{"name": engineContainer, "ready": ready}},
	}})
	if err != nil {
		e.fail(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	_, err = e.c.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !isGone(err) {
		e.fail(fmt.Errorf("pod %s: set ready=%t: %w", pod.Name, ready, err))
	}
}

// terminatePod plays kubelet's end of a deleted pod: unready, the preStop
// drain, SIGTERM, SIGKILL at the end of the grace period; then marks the
// pod stopped for KWOK to remove.
func (e *Engines) terminatePod(g *engine, pod *corev1.Pod, ctr *corev1.Container) {
	grace := defaultGrace
	if cur, err := e.pods.Pods(pod.Namespace).Get(pod.Name); err == nil && cur.UID == g.uid && cur.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*cur.DeletionGracePeriodSeconds) * time.Second
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	// The grace is the API's, on the twin's clock already (Substitutions
	// scale terminationGracePeriodSeconds).
	deadline := time.Now().Add(grace)
	e.setReady(g, pod, false)
	if drain, err := preStopDrain(ctr); err != nil {
		e.fail(fmt.Errorf("pod %s: %w", pod.Name, err))
	} else if drain != nil {
		e.drain(g, *drain, deadline)
	}
	e.stopProcess(g, syscall.SIGTERM)
	kill := time.Until(deadline)
	kill = max(kill, max(e.c.Dur(killAfterPreStop), minTwinWait))
	select {
	case <-g.done:
	case <-e.ctx.Done():
		e.stopProcess(g, syscall.SIGKILL)
	case <-time.After(kill):
		e.stopProcess(g, syscall.SIGKILL)
	}
	e.markStopped(g)
}

// drain runs the preStop drain against the engine, in the twin's time:
// settle, then poll its metrics until nothing runs or waits, it stops
// answering, or the drain's or the grace's deadline passes.
func (e *Engines) drain(g *engine, d drainScript, graceEnd time.Time) {
	end := time.Now().Add(e.c.Dur(d.deadline))
	if graceEnd.Before(end) {
		end = graceEnd
	}
	wait := e.c.Dur(d.settle)
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-g.done:
			return
		case <-time.After(min(wait, time.Until(end))):
		}
		if !time.Now().Before(end) {
			return
		}
		busy, err := busyRequests(g)
		if err != nil || busy == 0 {
			return
		}
		wait = max(e.c.Dur(d.poll), minTwinWait)
	}
}

// markStopped marks the pod stopped (EngineStoppedAnnotation), for KWOK
// to remove it.
func (e *Engines) markStopped(g *engine) {
	e.mu.Lock()
	e.note(g, func(t *EngineTiming) { t.Stopped = time.Now() })
	e.mu.Unlock()
	// The UID makes the patch a precondition: never another pod's.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": g.uid,
		"annotations": map[string]string{EngineStoppedAnnotation: "true"}}})
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	_, err := e.c.Client.CoreV1().Pods(g.namespace).Patch(ctx, g.name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !isGone(err) && e.ctx.Err() == nil {
		e.fail(fmt.Errorf("pod %s: mark stopped: %w", g.name, err))
	}
}
