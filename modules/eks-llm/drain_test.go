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
	p, err := render.ParseFile(filepath.Join("..", "..", "examples", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := render.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	var ns, gw map[string]any
	for _, f := range files {
		if f.Name != "platform.yaml" {
			continue
		}
		dec := yaml.NewDecoder(bytes.NewReader(f.Data))
		for {
			var d map[string]any
			if err := dec.Decode(&d); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			switch {
			case d["kind"] == "Namespace":
				ns = d
			case d["kind"] == "Deployment" && dig(d, "metadata", "name") == "llmplat-gateway":
				gw = d
			}
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
	delay := deregistrationDelay(t)
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

// deregistrationDelay reads the gateway target group's deregistration
// delay in edge.tf.
func deregistrationDelay(t *testing.T) int {
	t.Helper()
	tg := load(t, ".").block(t, "resource", "aws_lb_target_group", "gateway")
	n, acc := literal(t, attr(t, tg, "deregistration_delay")).AsBigFloat().Int64()
	if acc != big.Exact {
		t.Fatalf("deregistration_delay is not a whole number of seconds")
	}
	return int(n)
}
