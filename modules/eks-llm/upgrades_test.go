package eksllm_test

import (
	"testing"

	"github.com/llmplat/llmplat/runtime/render"
)

// TestDefaultAMIAliasIsRenders: the AWS layer checks kubernetes_version
// against the GPU nodes' AMI release, which is `llmplat render`'s default
// when gpu_pool.ami_alias is unset; the module's copy of that default must
// be the one render pins, or the check would vouch for another AMI.
func TestDefaultAMIAliasIsRenders(t *testing.T) {
	got := literal(t, load(t, ".").locals()["default_gpu_ami_alias"]).AsString()
	if got != render.DefaultAMIAlias {
		t.Errorf("local.default_gpu_ami_alias = %q, but llmplat render pins %q", got, render.DefaultAMIAlias)
	}
}
