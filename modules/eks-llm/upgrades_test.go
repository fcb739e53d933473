package eksllm_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"strings"
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

// TestGuideUpgradeTable keeps docs/deploy-eks.md's Upgrades table the
// module's: one row per minor of local.kubernetes_minors with its oldest
// Karpenter, oldest AMI release and end of standard support, and the
// default minor named with its date.
func TestGuideUpgradeTable(t *testing.T) {
	aws := load(t, ".")
	guide := string(mustRead(t, filepath.Join("..", "..", "docs", "deploy-eks.md")))
	row := regexp.MustCompile(`(?m)^\| (1\.[0-9]+) \| ([0-9.]+) \| v([0-9]{8}) \| ([0-9-]{10}) \|$`)
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(guide, -1) {
		got[m[1]] = strings.Join(m[2:], " ")
	}
	minors := literal(t, aws.locals()["kubernetes_minors"]).AsValueMap()
	want := map[string]string{}
	for minor, v := range minors {
		m := v.AsValueMap()
		k, _ := m["karpenter"].AsBigFloat().Int64()
		ami, _ := m["ami_release"].AsBigFloat().Int64()
		want[minor] = fmt.Sprintf("%d.%d.%d %d %s", k/1000000, k/1000%1000, k%1000, ami, m["standard_support_ends"].AsString()[:10])
	}
	if !maps.Equal(got, want) {
		t.Errorf("docs/deploy-eks.md's Upgrades table %v, but local.kubernetes_minors holds %v", got, want)
	}
	def := literal(t, attr(t, aws.block(t, "variable", "kubernetes_version"), "default")).AsString()
	ends := minors[def].AsValueMap()["standard_support_ends"].AsString()[:10]
	if !strings.Contains(guide, fmt.Sprintf("`kubernetes_version = %q`, is in standard support until %s", def, ends)) {
		t.Errorf("docs/deploy-eks.md does not name the default minor %s and the end of its standard support, %s", def, ends)
	}
}
