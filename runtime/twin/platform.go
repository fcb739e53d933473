package twin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// platformNet is where the platform's processes get their pod addresses:
// a /24 of PodRange that the controller manager hands to a node only
// after 254 others.
const platformNet = "10.244.255."

// Addresses of the twin's stand-ins for the platform's Services.
const (
	gatewayServiceIP      = platformNet + "1"
	orchestratorServiceIP = platformNet + "2"
)

// probeWait bounds a platform process's start until its readiness probe
// passes: a migration and a first refresh, on a busy machine.
const probeWait = 2 * time.Minute

// Platform is the platform running in the twin: the rendered gateway and
// orchestrator Deployments' pods as processes of the llmplat binary, on
// the test's PostgreSQL and Redis.
type Platform struct {
	// URL is the gateway Service's stand-in: the API's base URL.
	URL string
	// AdminToken is the admin API's token.
	AdminToken string
	// Gateways and Orchestrators are the replicas' processes.
	Gateways, Orchestrators []*PodProcess
}

// PodProcess is one platform pod run as a process.
type PodProcess struct {
	*Process
	// IP is its pod address.
	IP string
	// Ports are its container ports by name.
	Ports map[string]int32
}

// Addr is the pod's address for the container port named name.
func (p *PodProcess) Addr(name string) string {
	return net.JoinHostPort(p.IP, strconv.Itoa(int(p.Ports[name])))
}

// StartPlatform runs the platform's Deployments of rendered (llmplat
// render's objects, as they are) as processes of bin, the llmplat binary:
// each replica with its pod's arguments and environment, on the test's
// PostgreSQL and Redis, its orchestrators watching the twin's API server.
// What differs from a pod is the substitution "the platform's Deployments
// run as processes" (Substitutions).
func (c *Cluster) StartPlatform(tb testing.TB, bin string, rendered []*unstructured.Unstructured) *Platform {
	tb.Helper()
	deps := map[string]*appsv1.Deployment{}
	for _, o := range rendered {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			tb.Fatalf("twin: Deployment %s: %v", o.GetName(), err)
		}
		deps[d.Name] = &d
	}
	orch, gw := deps["llmplat-orchestrator"], deps["llmplat-gateway"]
	if orch == nil || gw == nil {
		tb.Fatal("twin: the rendered objects have no llmplat-orchestrator and llmplat-gateway Deployments")
	}
	rds := testenv.Redis(tb)
	p := &Platform{AdminToken: "llpadm_" + strings.Repeat("twin", 11)}
	secrets := map[string]map[string]string{"llmplat": {
		"LLMPLAT_DATABASE_URL":   testenv.Postgres(tb),
		"LLMPLAT_REDIS_URL":      rds.URL,
		"LLMPLAT_ADMIN_TOKEN":    p.AdminToken,
		"LLMPLAT_INTERNAL_TOKEN": "twin-internal-token-of-at-least-32-characters",
	}}
	// The orchestrators' Service (the gateways dispatch through it).
	orchProxy := StartServiceProxy(tb, net.JoinHostPort(orchestratorServiceIP, "8091"))
	services := map[string]string{orch.Name + "." + orch.Namespace + ".svc": orchestratorServiceIP}
	// No load balancer sends the twin's processes connections after they
	// are told to stop: they stop at once (-drain-delay), as before the
	// drain existed, within the twin's stop wait.
	extra := []string{"-redis-prefix=" + rds.Prefix, "-drain-delay=0s"}

	var internal []string
	for i := range replicas(orch) {
		pp := c.startPod(tb, bin, orch, fmt.Sprintf("%s-%d", orch.Name, i), platformNet+strconv.Itoa(10+i), secrets, services, extra)
		p.Orchestrators = append(p.Orchestrators, pp)
		internal = append(internal, pp.Addr("internal"))
	}
	orchProxy.SetBackends(internal...)
	var front []string
	// The gateways' hold of a caller of a model at zero is on the twin's
	// clock, as the SDK's timeout is (sdk.go); so is the queue limit
	// (QueueLimit).
	gwExtra := append(slicesClone(extra), "-wake-hold="+c.Dur(gateway.DefaultWakeHold).String(),
		"-queue-limit="+c.QueueLimit().String())
	for i := range replicas(gw) {
		pp := c.startPod(tb, bin, gw, fmt.Sprintf("%s-%d", gw.Name, i), platformNet+strconv.Itoa(20+i), secrets, services, gwExtra)
		p.Gateways = append(p.Gateways, pp)
		front = append(front, pp.Addr("http"))
	}
	gwProxy := StartServiceProxy(tb, net.JoinHostPort(gatewayServiceIP, "8080"), front...)
	p.URL = "http://" + gwProxy.Addr
	return p
}

// replicas is a Deployment's replica count (1 when unset).
func replicas(d *appsv1.Deployment) int {
	if d.Spec.Replicas == nil {
		return 1
	}
	return int(*d.Spec.Replicas)
}

// startPod runs the first container of d's pod template as pod name at
// ip, and waits until its readiness probe passes.
func (c *Cluster) startPod(tb testing.TB, bin string, d *appsv1.Deployment, name, ip string,
	secrets map[string]map[string]string, services map[string]string, extra []string) *PodProcess {
	tb.Helper()
	ctr := d.Spec.Template.Spec.Containers[0]
	env, err := containerEnv(ctr, name, d.Namespace, ip, secrets)
	if err != nil {
		tb.Fatalf("twin: pod %s: %v", name, err)
	}
	// In a pod the orchestrators find the API server in-cluster; here,
	// through the twin's kubeconfig.
	env["KUBECONFIG"] = c.Kubeconfig
	args := podArgs(ctr.Args, env, ip, services)
	args = append(args, extra...)
	var envList []string
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	ports := map[string]int32{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	pp := &PodProcess{Process: c.Start(tb, name, bin, args, envList...), IP: ip, Ports: ports}
	if probe := ctr.ReadinessProbe; probe != nil {
		pp.waitAlive(tb, probeWait, "a passing readiness probe", func(ctx context.Context) error {
			return runProbe(ctx, probe.ProbeHandler, pp)
		})
	}
	return pp
}

// containerEnv resolves a container's environment as the kubelet would:
// its secrets (envFrom and secretKeyRef), its pod's fields and its
// resource limits; anything else is an error, so that a template the
// twin cannot honour is noticed.
func containerEnv(ctr corev1.Container, pod, namespace, ip string, secrets map[string]map[string]string) (map[string]string, error) {
	env := map[string]string{}
	for _, from := range ctr.EnvFrom {
		if from.SecretRef == nil {
			return nil, errors.New("envFrom other than a Secret")
		}
		s, ok := secrets[from.SecretRef.Name]
		if !ok {
			return nil, fmt.Errorf("no Secret %s in the twin", from.SecretRef.Name)
		}
		for k, v := range s {
			env[from.Prefix+k] = v
		}
	}
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				env[e.Name] = pod
			case "metadata.namespace":
				env[e.Name] = namespace
			case "status.podIP":
				env[e.Name] = ip
			default:
				return nil, fmt.Errorf("env %s: field %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			q, ok := ctr.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(e.ValueFrom.ResourceFieldRef.Resource, "limits."))]
			if !ok || !strings.HasPrefix(e.ValueFrom.ResourceFieldRef.Resource, "limits.") {
				return nil, fmt.Errorf("env %s: resource %s", e.Name, e.ValueFrom.ResourceFieldRef.Resource)
			}
			env[e.Name] = strconv.FormatInt(q.Value(), 10)
		case e.ValueFrom.SecretKeyRef != nil:
			v, ok := secrets[e.ValueFrom.SecretKeyRef.Name][e.ValueFrom.SecretKeyRef.Key]
			if !ok {
				return nil, fmt.Errorf("env %s: no key %s in Secret %s", e.Name, e.ValueFrom.SecretKeyRef.Key, e.ValueFrom.SecretKeyRef.Name)
			}
			env[e.Name] = v
		default:
			return nil, fmt.Errorf("env %s: a source the twin does not know", e.Name)
		}
	}
	return env, nil
}

// varRef is a container argument's $(VAR) reference.
var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// podArgs are a container's arguments as its process gets them: $(VAR)
// expanded from its environment, a listen address ":port" bound to the
// pod's own address (every process of the twin shares one network
// namespace, as pods on one node would not), and a Service's DNS name
// (host "<name>.<namespace>.svc") replaced by its stand-in's address.
func podArgs(args []string, env map[string]string, ip string, services map[string]string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		a = varRef.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
		if flag, value, ok := strings.Cut(a, "="); ok && strings.HasPrefix(value, ":") {
			a = flag + "=" + ip + value
		}
		for host, addr := range services {
			a = strings.ReplaceAll(a, "//"+host+":", "//"+addr+":")
		}
		out = append(out, a)
	}
	return out
}

// runProbe runs an httpGet or tcpSocket probe against pod p.
func runProbe(ctx context.Context, h corev1.ProbeHandler, p *PodProcess) error {
	var port intstr.IntOrString
	switch {
	case h.HTTPGet != nil:
		port = h.HTTPGet.Port
	case h.TCPSocket != nil:
		port = h.TCPSocket.Port
	default:
		return errors.New("a probe the twin does not run (only httpGet and tcpSocket)")
	}
	addr := net.JoinHostPort(p.IP, strconv.Itoa(port.IntValue()))
	if port.Type == intstr.String {
		addr = p.Addr(port.StrVal)
	}
	if h.TCPSocket != nil {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return httpGetOK(ctx, "http://"+addr+h.HTTPGet.Path)
}

// minQueueLimit is the least queue limit the twin's gateways run with,
// in twin time: the twin's own delays on a busy 2-core machine (process
// scheduling, the gateway's and orchestrators' hops, a new engine's
// readiness reaching the router) do not shrink with the time scale.
const minQueueLimit = 2 * time.Second

// QueueLimit is the gateways' queue limit on the twin's clock: the wait
// for an engine with room that a scaling model must keep its callers
// below, set against cold starts and answer times that the twin scales,
// so the twin scales it too (at least minQueueLimit).
func (c *Cluster) QueueLimit() time.Duration {
	return max(c.Dur(gateway.DefaultQueueLimit), minQueueLimit)
}

// BuildLLMPlat builds the llmplat binary into a folder of the test's and
// returns its path.
func BuildLLMPlat(tb testing.TB) string {
	tb.Helper()
	bin := tb.TempDir() + "/llmplat"
	cmd := exec.Command("go", "build", "-o", bin, "github.com/llmplat/llmplat/runtime/cmd/llmplat")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("twin: build llmplat: %v\n%s", err, out)
	}
	return bin
}
