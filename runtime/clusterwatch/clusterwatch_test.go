package clusterwatch

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDisruption: Karpenter's taints (v1 and before), the interruption
// handler's, a deletion and a cordon each mark a Node as going; other
// taints (the GPU one every pool carries) do not.
func TestDisruption(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		node corev1.Node
		want string
	}{
		{"gpu taint only", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}}}, ""},
		{"karpenter v1", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}}}, "disrupted by Karpenter"},
		{"karpenter before v1", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "karpenter.sh/disruption", Value: "disrupting", Effect: corev1.TaintEffectNoSchedule}}}}, "disrupted by Karpenter"},
		{"interruption handler", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "aws-node-termination-handler/spot-itn", Effect: corev1.TaintEffectNoSchedule}}}}, "interruption notice"},
		{"deleted", corev1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, "being deleted"},
		{"cordoned", corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, "cordoned"},
	} {
		tc.node.Name = "n1"
		got := disruption(&tc.node)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: disruption = %q, want one saying %q", tc.name, got, tc.want)
		}
	}
}

// TestEndpointRules: which endpoints are nodes, and under which name.
func TestEndpointRules(t *testing.T) {
	yes, no := true, false
	host := "vllm-host"
	for _, tc := range []struct {
		name  string
		ep    discoveryv1.Endpoint
		id    string
		ready bool
	}{
		{"pod, ready", discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "vllm-llama-8b-7d9f-x2"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}}, "vllm-llama-8b-7d9f-x2", true},
		{"unknown readiness counts as ready", discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "p"}}, "p", true},
		{"unready", discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "p"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}}, "p", false},
		{"terminating", discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "p"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes, Terminating: &yes}}, "p", false},
		{"hostname without pod", discoveryv1.Endpoint{Hostname: &host}, host, true},
		{"nothing to name it", discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Node", Name: "x"}}, "", true},
	} {
		if got := endpointID(tc.ep); got != tc.id {
			t.Errorf("%s: id %q, want %q", tc.name, got, tc.id)
		}
		if got := ready(tc.ep); got != tc.ready {
			t.Errorf("%s: ready %v, want %v", tc.name, got, tc.ready)
		}
	}
}

// TestModelSlot: the Service's annotation must parse and name the model
// its label does; its expected load, when given, is whole seconds.
func TestModelSlot(t *testing.T) {
	svc := func(label, spec string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "vllm-llama-8b", Labels: map[string]string{ModelLabel: label}}}
		if spec != "" {
			s.Annotations = map[string]string{ModelSpecAnnotation: spec}
		}
		return s
	}
	const good = "name=llama-8b,served=meta-llama/Llama-3.1-8B-Instruct,max-num-seqs=128,max-model-len=8192,kv-tokens=300000"
	for _, tc := range []struct {
		name, label, spec string
		load              time.Duration // -1: refused
	}{
		{"good spec", "llama-8b", good, 0},
		{"with an expected load", "llama-8b", good + ",expected-load=780", 13 * time.Minute},
		{"expected load first", "llama-8b", "expected-load=60," + good, time.Minute},
		{"no annotation", "llama-8b", "", -1},
		{"another model than the label", "qwen-32b", good, -1},
		{"incomplete", "llama-8b", "name=llama-8b", -1},
		{"expected load not seconds", "llama-8b", good + ",expected-load=13m", -1},
		{"expected load zero", "llama-8b", good + ",expected-load=0", -1},
		{"expected load twice", "llama-8b", good + ",expected-load=60,expected-load=90", -1},
		{"expected load past a day", "llama-8b", good + ",expected-load=90000", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, load, err := modelSlot(svc(tc.label, tc.spec))
			if tc.load < 0 {
				if err == nil {
					t.Errorf("taken: %+v, load %v", m, load)
				}
				return
			}
			if err != nil || m.MaxNumSeqs != 128 || m.KVCapacityTokens != 300000 || load != tc.load {
				t.Errorf("got %+v, load %v, %v; want the spec with load %v", m, load, err, tc.load)
			}
		})
	}
}
