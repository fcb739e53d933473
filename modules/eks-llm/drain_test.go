package eksllm_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
	"gopkg.in/yaml.v3"

	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/render"
)

// nlbDeregistrationLag is how long an NLB goes on opening connections to
// a target after it starts deregistering it (aws-load-balancer-controller
// issues 2366 and 3270: about 2 minutes, whatever the deregistration
// delay). A stopping pod must serve that long before closing its listener.
const nlbDeregistrationLag = 2 * time.Minute

// TestGatewayOutlivesItsDeregistration: a gateway pod behind the NLB stops
// without refusing or dropping a connection (issue 30, issue 43). Its
// namespace asks the AWS Load Balancer Controller for readiness gates; at
// SIGTERM the gateway drains (-drain-delay) for as long as the NLB may
// still open connections to it, failing /healthz, which is both its
// readiness probe and the target group's health check, while its liveness
// probe is another path that stays up; no preStop delays that drain; its
// grace covers the drain plus the gateway's shutdown budget; and the target
// group's deregistration delay (edge.tf) lasts as long as the gateway may
// still serve a flow, and no longer than the pod lives.
func TestGatewayOutlivesItsDeregistration(t *testing.T) {
	var ns map[string]any
	for _, d := range renderedPlatform(t) {
		if d["kind"] == "Namespace" {
			ns = d
		}
	}
	if ns == nil {
		t.Fatal("platform.yaml has no Namespace")
	}
	if got := dig(ns, "metadata", "labels", "elbv2.k8s.aws/pod-readiness-gate-inject"); got != "enabled" {
		t.Errorf("namespace label elbv2.k8s.aws/pod-readiness-gate-inject = %v, want enabled: rollouts could leave the target group with no healthy target", got)
	}
	pod, ctr := podAndContainer(t, "llmplat-gateway")
	drain := drainDelay(t, ctr)
	checkDrainsBehindTheNLB(t, "gateway", ctr, drain, "http")
	grace := seconds(pod["terminationGracePeriodSeconds"])
	serving := drain + gateway.ShutdownBudget // the longest a stopping gateway serves a flow
	if grace <= serving {
		t.Errorf("gateway grace %s does not cover its drain %s plus its shutdown budget %s", grace, drain, gateway.ShutdownBudget)
	}
	delay := deregistrationDelay(t, "gateway")
	if delay < serving {
		t.Errorf("deregistration delay %s is shorter than a stopping gateway serves (%s): the NLB drops its last streams", delay, serving)
	}
	if delay > grace {
		t.Errorf("deregistration delay %s outlasts the gateway pods' grace %s", delay, grace)
	}
}

// TestOrchestratorOutlivesItsDeregistration: a stopping orchestrator
// replica drains as the gateway does, on its node socket's /healthz (its
// readiness probe and the node socket target group's health check), so
// that the nodes it then asks to reconnect elsewhere are not sent back to
// it; the node sockets' target group drains it for as long as it serves
// them (the drain plus its shutdown grace), and no longer than the pod
// lives.
func TestOrchestratorOutlivesItsDeregistration(t *testing.T) {
	pod, ctr := podAndContainer(t, "llmplat-orchestrator")
	drain := drainDelay(t, ctr)
	checkDrainsBehindTheNLB(t, "nodes", ctr, drain, "nodes")
	grace := seconds(pod["terminationGracePeriodSeconds"])
	serving := drain + orchestrator.ShutdownGrace
	if grace <= serving {
		t.Errorf("orchestrator grace %s does not cover its drain %s plus its shutdown grace %s", grace, drain, orchestrator.ShutdownGrace)
	}
	delay := deregistrationDelay(t, "nodes")
	if delay < serving {
		t.Errorf("node socket deregistration delay %s is shorter than a stopping replica serves its sockets (%s)", delay, serving)
	}
	if delay > grace {
		t.Errorf("node socket deregistration delay %s outlasts the orchestrator pods' grace %s", delay, grace)
	}
}

// checkDrainsBehindTheNLB checks a container that drains behind the target
// group named tg: a drain at least the NLB's lag, no preStop to hold it
// back, readiness on /healthz at port (the path that fails while it
// drains), the target group's health check on that same path, and a
// liveness probe that does not fail while it drains.
func checkDrainsBehindTheNLB(t *testing.T, tg string, ctr map[string]any, drain time.Duration, port string) {
	t.Helper()
	if drain < nlbDeregistrationLag {
		t.Errorf("%s: drain %s is shorter than the NLB goes on opening connections to a deregistered target (%s)", tg, drain, nlbDeregistrationLag)
	}
	if pre := dig(ctr, "lifecycle", "preStop"); pre != nil {
		t.Errorf("%s: preStop %v delays the SIGTERM that starts the drain (and its failed health check)", tg, pre)
	}
	if got, gotPort := dig(ctr, "readinessProbe", "httpGet", "path"), dig(ctr, "readinessProbe", "httpGet", "port"); got != "/healthz" || gotPort != port {
		t.Errorf("%s: readiness probe %v on %v, want /healthz on %s (unready while draining)", tg, got, gotPort, port)
	}
	if got := dig(ctr, "livenessProbe", "httpGet", "path"); got == "/healthz" {
		t.Errorf("%s: liveness probe on /healthz, which fails while draining: the kubelet would restart a draining pod", tg)
	}
	hc := healthCheck(t, tg)
	if hc["protocol"] != "HTTP" || hc["path"] != "/healthz" || hc["port"] != "traffic-port" {
		t.Errorf("target group %s health check %v, want HTTP /healthz on the traffic port: a draining pod would still look healthy", tg, hc)
	}
}

// podAndContainer is the pod spec and first container of the Deployment
// named name in the example platform's rendered platform.yaml.
func podAndContainer(t *testing.T, name string) (pod, ctr map[string]any) {
	t.Helper()
	pod, _ = dig(renderedDeployment(t, name), "spec", "template", "spec").(map[string]any)
	containers, _ := pod["containers"].([]any)
	if len(containers) == 0 {
		t.Fatalf("the %s Deployment has no container", name)
	}
	ctr, _ = containers[0].(map[string]any)
	return pod, ctr
}

// drainDelay is a container's -drain-delay argument, zero without one.
func drainDelay(t *testing.T, ctr map[string]any) time.Duration {
	t.Helper()
	args, _ := ctr["args"].([]any)
	for _, a := range args {
		if v, ok := strings.CutPrefix(fmt.Sprint(a), "-drain-delay="); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("-drain-delay=%s: %v", v, err)
			}
			return d
		}
	}
	return 0
}

func seconds(v any) time.Duration {
	n, _ := v.(int)
	return time.Duration(n) * time.Second
}

// renderedDeployment is the Deployment named name in the example
// platform's rendered platform.yaml.
func renderedDeployment(t *testing.T, name string) map[string]any {
	t.Helper()
	for _, d := range renderedPlatform(t) {
		if d["kind"] == "Deployment" && dig(d, "metadata", "name") == name {
			return d
		}
	}
	t.Fatalf("platform.yaml has no %s Deployment", name)
	return nil
}

// renderedPlatform is the documents of the example platform's rendered
// platform.yaml.
func renderedPlatform(t *testing.T) []map[string]any {
	t.Helper()
	p, err := render.ParseFile(filepath.Join("..", "..", "examples", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := render.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	for _, f := range files {
		if f.Name != "platform.yaml" {
			continue
		}
		dec := yaml.NewDecoder(bytes.NewReader(f.Data))
		for {
			var d map[string]any
			if err := dec.Decode(&d); errors.Is(err, io.EOF) {
				return docs
			} else if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, d)
		}
	}
	t.Fatal("the example platform renders no platform.yaml")
	return nil
}

// deregistrationDelay reads the deregistration delay of the target group
// named name in edge.tf.
func deregistrationDelay(t *testing.T, name string) time.Duration {
	t.Helper()
	tg := load(t, ".").block(t, "resource", "aws_lb_target_group", name)
	n, acc := literal(t, attr(t, tg, "deregistration_delay")).AsBigFloat().Int64()
	if acc != big.Exact {
		t.Fatalf("deregistration_delay is not a whole number of seconds")
	}
	return time.Duration(n) * time.Second
}

// healthCheck reads the literal attributes of the health check of the
// target group named name in edge.tf.
func healthCheck(t *testing.T, name string) map[string]string {
	t.Helper()
	tg := load(t, ".").block(t, "resource", "aws_lb_target_group", name)
	out := map[string]string{}
	for _, b := range tg.Body.Blocks {
		if b.Type != "health_check" {
			continue
		}
		for k, a := range b.Body.Attributes {
			if v, diags := a.Expr.Value(nil); !diags.HasErrors() && v.Type() == cty.String {
				out[k] = v.AsString()
			}
		}
	}
	return out
}
