package eksllm_test

import (
	"bytes"
	"errors"
	"io"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/render"
)

// TestGatewayOutlivesItsDeregistration: a gateway pod behind the NLB stops
// without dropping a connection (issue 30). Its namespace asks the AWS Load
// Balancer Controller for readiness gates; its preStop sleep keeps it
// serving while the NLB stops sending it new connections; its grace covers
// that delay plus the gateway's own shutdown budget; and the target group's
// deregistration delay (edge.tf) lasts as long as the gateway may still
// serve a flow, and no longer than the pod lives.
func TestGatewayOutlivesItsDeregistration(t *testing.T) {
	var ns, gw map[string]any
	for _, d := range renderedPlatform(t) {
		switch {
		case d["kind"] == "Namespace":
			ns = d
		case d["kind"] == "Deployment" && dig(d, "metadata", "name") == "llmplat-gateway":
			gw = d
		}
	}
	if ns == nil || gw == nil {
		t.Fatal("platform.yaml has no Namespace or no llmplat-gateway Deployment")
	}
	if got := dig(ns, "metadata", "labels", "elbv2.k8s.aws/pod-readiness-gate-inject"); got != "enabled" {
		t.Errorf("namespace label elbv2.k8s.aws/pod-readiness-gate-inject = %v, want enabled: rollouts could leave the target group with no healthy target", got)
	}
	pod, _ := dig(gw, "spec", "template", "spec").(map[string]any)
	containers, _ := pod["containers"].([]any)
	if len(containers) == 0 {
		t.Fatal("the gateway Deployment has no container")
	}
	preStop, _ := dig(containers[0], "lifecycle", "preStop", "sleep", "seconds").(int)
	grace, _ := pod["terminationGracePeriodSeconds"].(int)
	delay := deregistrationDelay(t, "gateway")
	seconds := func(n int) time.Duration { return time.Duration(n) * time.Second }
	serving := seconds(preStop) + gateway.ShutdownBudget // the longest a stopping gateway serves a flow
	switch {
	case preStop <= 0:
		t.Errorf("the gateway has no preStop sleep: its listener closes while the NLB still sends it connections")
	case seconds(grace) <= serving:
		t.Errorf("gateway grace %d s does not cover its preStop %d s plus its shutdown budget %s", grace, preStop, gateway.ShutdownBudget)
	}
	if seconds(delay) < serving {
		t.Errorf("deregistration delay %d s is shorter than a stopping gateway serves (%s): the NLB drops its last streams", delay, serving)
	}
	if delay > grace {
		t.Errorf("deregistration delay %d s outlasts the gateway pods' grace %d s", delay, grace)
	}
}

// TestOrchestratorOutlivesItsDeregistration: the node sockets' target
// group drains a stopping orchestrator replica for as long as it lets its
// sockets finish (its shutdown grace), and no longer than the pod lives.
func TestOrchestratorOutlivesItsDeregistration(t *testing.T) {
	orch := renderedDeployment(t, "llmplat-orchestrator")
	pod, _ := dig(orch, "spec", "template", "spec").(map[string]any)
	grace, _ := pod["terminationGracePeriodSeconds"].(int)
	delay := deregistrationDelay(t, "nodes")
	seconds := func(n int) time.Duration { return time.Duration(n) * time.Second }
	if seconds(grace) <= orchestrator.ShutdownGrace {
		t.Errorf("orchestrator grace %d s does not cover its shutdown grace %s", grace, orchestrator.ShutdownGrace)
	}
	if seconds(delay) < orchestrator.ShutdownGrace {
		t.Errorf("node socket deregistration delay %d s is shorter than a stopping replica serves its sockets (%s)", delay, orchestrator.ShutdownGrace)
	}
	if delay > grace {
		t.Errorf("node socket deregistration delay %d s outlasts the orchestrator pods' grace %d s", delay, grace)
	}
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
func deregistrationDelay(t *testing.T, name string) int {
	t.Helper()
	tg := load(t, ".").block(t, "resource", "aws_lb_target_group", name)
	n, acc := literal(t, attr(t, tg, "deregistration_delay")).AsBigFloat().Int64()
	if acc != big.Exact {
		t.Fatalf("deregistration_delay is not a whole number of seconds")
	}
	return int(n)
}
