package render

import (
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestGPUNodesArePinnedAndBudgeted: the GPU nodes' AMI is a pinned AL2023
// release, never @latest; each GPU pool consolidates only empty nodes,
// replaces drifted nodes one at a time, and bounds a node's drain by a
// terminationGracePeriod longer than every model pod's own grace (so a PDB
// that protects a single replica delays a drain but cannot block it, and
// the pod still gets its full drain when Karpenter deletes it) (issue 30).
func TestGPUNodesArePinnedAndBudgeted(t *testing.T) {
	p := example(t)
	files, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	var pools []map[string]any
	var podGraces []int
	for _, f := range files {
		for _, d := range docs(t, f) {
			switch d["kind"] {
			case "EC2NodeClass":
				terms := dig(t, d, "spec", "amiSelectorTerms").([]any)
				alias, _ := dig(t, terms, 0, "alias").(string)
				if len(terms) != 1 || alias != DefaultAMIAlias || strings.HasSuffix(alias, "@latest") {
					t.Errorf("EC2NodeClass amiSelectorTerms %v, want the pinned %s", terms, DefaultAMIAlias)
				}
			case "NodePool":
				pools = append(pools, d)
			case "Deployment":
				if strings.HasPrefix(f.Name, "model-") {
					podGraces = append(podGraces, dig(t, d, "spec", "template", "spec", "terminationGracePeriodSeconds").(int))
				}
			}
		}
	}
	// A spot model has two Deployments (its on-demand floor and the scaled
	// one); every model has at least one.
	if len(pools) != 2 || len(podGraces) < len(p.Models) {
		t.Fatalf("%d NodePools and %d model Deployments, want 2 and at least %d", len(pools), len(podGraces), len(p.Models))
	}
	for _, np := range pools {
		name := dig(t, np, "metadata", "name")
		if got := dig(t, np, "spec", "disruption", "consolidationPolicy"); got != "WhenEmpty" {
			t.Errorf("%s: consolidationPolicy %v, want WhenEmpty (a busy GPU node is never consolidated)", name, got)
		}
		drifted := ""
		budgets, _ := dig(t, np, "spec", "disruption", "budgets").([]any)
		for _, b := range budgets {
			reasons, _ := dig(t, b, "reasons").([]any)
			for _, r := range reasons {
				if r == "Drifted" {
					drifted, _ = dig(t, b, "nodes").(string)
				}
			}
		}
		if drifted != "1" {
			t.Errorf("%s: a drift may disrupt %q nodes at once, want 1", name, drifted)
		}
		spelt, _ := dig(t, np, "spec", "template", "spec", "terminationGracePeriod").(string)
		tgp, err := time.ParseDuration(spelt)
		if err != nil {
			t.Errorf("%s: terminationGracePeriod: %v", name, err)
			continue
		}
		for _, g := range podGraces {
			if time.Duration(g)*time.Second >= tgp {
				t.Errorf("%s: terminationGracePeriod %s does not exceed a model pod's grace of %d s: Karpenter would delete the pod without its drain", name, tgp, g)
			}
		}
	}
}

// TestEngineImagePulledAsTheNodeJoins: every GPU pool's nodes run the
// engine-prepull DaemonSet with the platform's engine image (tolerating the
// GPU taint, asking for no GPU), so the ~10 GB pull starts when the node
// joins instead of after the model pod's weights are copied; and the
// EC2NodeClass's userData turns the kubelet's one-at-a-time pulls off, or
// that pull would hold back the init containers' image and gain nothing
// (issue 43).
func TestEngineImagePulledAsTheNodeJoins(t *testing.T) {
	p := example(t)
	files, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	var prepull, nodeClass map[string]any
	var pools []string
	for _, f := range files {
		for _, d := range docs(t, f) {
			switch {
			case d["kind"] == "DaemonSet" && dig(t, d, "metadata", "name") == "engine-prepull":
				prepull = d
			case d["kind"] == "EC2NodeClass":
				nodeClass = d
			case d["kind"] == "NodePool":
				pools = append(pools, dig(t, d, "metadata", "name").(string))
			}
		}
	}
	if prepull == nil || nodeClass == nil {
		t.Fatalf("engine-prepull DaemonSet %v, EC2NodeClass %v: want both", prepull != nil, nodeClass != nil)
	}
	spec := dig(t, prepull, "spec", "template", "spec")
	containers := dig(t, spec, "containers").([]any)
	if len(containers) != 1 || dig(t, containers, 0, "image") != p.Images.Engine {
		t.Errorf("engine-prepull containers %v, want one with the engine image %s", containers, p.Images.Engine)
	}
	if limits, _ := dig(t, containers, 0, "resources", "limits").(map[string]any); limits["nvidia.com/gpu"] != nil {
		t.Errorf("engine-prepull asks for a GPU: %v", limits)
	}
	term := dig(t, spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", 0, "matchExpressions", 0)
	var on []string
	for _, v := range dig(t, term, "values").([]any) {
		on = append(on, v.(string))
	}
	if dig(t, term, "key") != "karpenter.sh/nodepool" || strings.Join(on, ",") != strings.Join(pools, ",") {
		t.Errorf("engine-prepull runs on %v %v, want the GPU pools %v", dig(t, term, "key"), on, pools)
	}
	tolerated := false
	for _, tol := range dig(t, spec, "tolerations").([]any) {
		tolerated = tolerated || dig(t, tol, "key") == "nvidia.com/gpu"
	}
	if !tolerated {
		t.Error("engine-prepull does not tolerate the GPU nodes' taint: it would never run on them")
	}
	userData, _ := dig(t, nodeClass, "spec", "userData").(string)
	if got := kubeletConfigOf(t, userData)["serializeImagePulls"]; got != false {
		t.Errorf("EC2NodeClass userData's kubelet serializeImagePulls %v, want false:\n%s", got, userData)
	}
}

// kubeletConfigOf reads the kubelet config of the NodeConfig in an AL2023
// userData: a MIME multipart document with one application/node.eks.aws
// part, as nodeadm reads it.
func kubeletConfigOf(t *testing.T, userData string) map[string]any {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(userData))
	if err != nil {
		t.Fatalf("userData is not a MIME document: %v", err)
	}
	media, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || media != "multipart/mixed" {
		t.Fatalf("userData's Content-Type %q (%v), want multipart/mixed", msg.Header.Get("Content-Type"), err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := r.NextPart()
		if err != nil {
			t.Fatalf("userData has no application/node.eks.aws part: %v", err)
		}
		if part.Header.Get("Content-Type") != "application/node.eks.aws" {
			continue
		}
		var nc struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Spec       struct {
				Kubelet struct {
					Config map[string]any `yaml:"config"`
				} `yaml:"kubelet"`
			} `yaml:"spec"`
		}
		if err := yaml.NewDecoder(part).Decode(&nc); err != nil || nc.APIVersion != "node.eks.aws/v1alpha1" || nc.Kind != "NodeConfig" {
			t.Fatalf("userData's NodeConfig %+v: %v", nc, err)
		}
		return nc.Spec.Kubelet.Config
	}
}
