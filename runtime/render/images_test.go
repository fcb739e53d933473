package render

import (
	"errors"
	"testing"
)

func TestCheckImage(t *testing.T) {
	tests := []struct {
		ref  string
		want bool
	}{
		{"nvcr.io/nvidia/k8s-device-plugin:v0.17.0", true},
		{"vllm/vllm-openai:v0.10.1", true},
		{"docker.io/vllm/vllm-openai:v0.10.1", true},
		{"123456789012.dkr.ecr.eu-central-1.amazonaws.com/llmplat:0.1.0", true},
		{"123456789012.dkr.ecr.us-gov-west-1.amazonaws.com/llmplat@sha256:0123", true},
		{"public.ecr.aws/karpenter/controller:1.10.0", true},
		{"registry.k8s.io/pause:3.10", true},
		{"nvidia/k8s-device-plugin:v0.17.0", false},
		{"docker.io/nvidia/k8s-device-plugin:v0.17.0", false},
		{"llmplat/llmplat:0.1.0", false},
		{"busybox", false},
		{"busybox:1.36", false},
		{"public.ecr.aws.example.com/x:1", false},
		{"evil.example.com/vllm/vllm-openai:v0.10.1", false},
		{"12345.dkr.ecr.eu-central-1.amazonaws.com/llmplat:0.1.0", false},
		{"localhost:5000/llmplat:0.1.0", false},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			err := CheckImage(tt.ref)
			if got := err == nil; got != tt.want {
				t.Errorf("CheckImage(%q) = %v, want accepted %v", tt.ref, err, tt.want)
			}
			if err != nil && !errors.Is(err, ErrUnknownRegistry) {
				t.Errorf("CheckImage(%q) = %v, not ErrUnknownRegistry", tt.ref, err)
			}
		})
	}
}
