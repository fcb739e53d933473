package twin

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// KWOK's version and the label by which it knows the nodes it plays.
const (
	// KWOKModule is the module whose cmd/kwok the twin runs and whose
	// kustomize/stage files it plays: KWOK ships no default stages.
	KWOKModule = "sigs.k8s.io/kwok@v0.8.0"
	// KWOKNodeLabel and KWOKNodeValue mark the nodes Karpenter's kwok
	// provider creates (its v1alpha1.KwokLabelKey and KwokLabelValue):
	// KWOK plays exactly these nodes and the pods bound to them.
	KWOKNodeLabel = "kwok.x-k8s.io/node"
	KWOKNodeValue = "fake"
	// fallbackPodCIDR is where KWOK takes a pod's address from when its
	// node has no range yet. KWOK gives each pod an address of its node's
	// range (the controller manager carves a /24 of PodRange per node),
	// unique, handed back when the pod is gone; this /24 is the one before
	// the platform's own (platformNet), given to a node only after 253
	// others.
	fallbackPodCIDR = "10.244.254.0/24"
	// kwokNodeLeaseSeconds is the node Lease's duration, kubelet's default
	// (40 s): KWOK renews each node's Lease at a quarter of it, so the node
	// lifecycle controller never marks a played node NotReady.
	kwokNodeLeaseSeconds = 40
)

// Engine pods, told apart by the label every rendered engine pod carries.
const (
	// EngineLabel and EngineLabelValue mark an engine pod
	// (templates/model.yaml.tmpl). KWOK gives such a pod its address and
	// runs it but leaves its readiness to the engine backer (Engines), and
	// removes it once the backer has marked it stopped.
	EngineLabel      = "app.kubernetes.io/name"
	EngineLabelValue = "vllm"
	// EngineStoppedAnnotation is set ("true") by the engine backer on a
	// terminating engine pod once its process has ended, as kubelet
	// removes a pod once its containers have exited; KWOK's
	// engine-pod-delete stage deletes the pod then.
	EngineStoppedAnnotation = "twin.llmplat.io/engine-stopped"
)

// kwokStages are the module's stage files the twin plays, as KWOK's
// "fast" stage set: nodes Ready at once and kept alive through their
// Lease; pods running at once, completed (Jobs) and deleted at once.
var kwokStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// notEngineStages are the module's pod stages that must not touch engine
// pods: pod-ready would mark an engine Ready before it has loaded, and
// pod-delete would remove it before its drain. engineStages replace them
// for engine pods.
var notEngineStages = map[string]bool{"pod-ready": true, "pod-delete": true}

//go:embed testdata/kwok/engine-stages.yaml
var engineStages []byte

// StartKWOK runs KWOK against the twin's API server, playing the kubelet
// of every node Karpenter's kwok provider creates (KWOKNodeLabel) and of
// the pods bound to them. Each pod gets an address of its node's range of
// PodRange. Engine pods run unready and stay while terminating until the
// engine backer (StartEngines) sets their readiness and marks them
// stopped: without the backer they never turn Ready and never go.
func (c *Cluster) StartKWOK(tb testing.TB) {
	tb.Helper()
	if !c.HasBin(tb, "kwok") {
		return
	}
	config, err := kwokConfig(moduleDir(tb, KWOKModule))
	if err != nil {
		tb.Fatalf("twin: kwok stages: %v", err)
	}
	path := filepath.Join(c.Dir, "kwok.yaml")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		tb.Fatalf("twin: write kwok config: %v", err)
	}
	c.Start(tb, "kwok", c.Bin("kwok"), []string{
		"--config=" + path,
		"--kubeconfig=" + c.Kubeconfig,
		"--manage-nodes-with-label-selector=" + KWOKNodeLabel + "=" + KWOKNodeValue,
		"--cidr=" + fallbackPodCIDR,
		"--node-lease-duration-seconds=" + strconv.Itoa(kwokNodeLeaseSeconds),
	})
}

// kwokConfig is KWOK's configuration: the module's stages under
// modDir (kwokStages, those in notEngineStages narrowed to pods that are
// not engines) and the twin's own engine stages, one YAML stream.
func kwokConfig(modDir string) ([]byte, error) {
	var docs [][]byte
	for _, rel := range kwokStages {
		raw, err := os.ReadFile(filepath.Join(modDir, rel))
		if err != nil {
			return nil, err
		}
		doc, err := excludeEngines(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		docs = append(docs, doc)
	}
	docs = append(docs, engineStages)
	return bytes.Join(docs, []byte("\n---\n")), nil
}

// excludeEngines adds to a stage in notEngineStages a selector
// expression that no engine pod matches, and returns other stages as
// they are.
func excludeEngines(raw []byte) ([]byte, error) {
	var stage map[string]any
	if err := yaml.Unmarshal(raw, &stage); err != nil {
		return nil, err
	}
	meta, _ := stage["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if !notEngineStages[name] {
		return raw, nil
	}
	spec, _ := stage["spec"].(map[string]any)
	sel, _ := spec["selector"].(map[string]any)
	exprs, _ := sel["matchExpressions"].([]any)
	if spec == nil || sel == nil {
		return nil, fmt.Errorf("stage %s has no selector to narrow", name)
	}
	sel["matchExpressions"] = append(exprs, map[string]any{
		"key":      fmt.Sprintf(".metadata.labels[%q]", EngineLabel),
		"operator": "NotIn",
		"values":   []any{EngineLabelValue},
	})
	return yaml.Marshal(stage)
}

// moduleDir is the folder of module (path@version) in the module cache,
// where building the twin's binaries put it: the twin reads stage files
// and CRDs from there, never from the network.
func moduleDir(tb testing.TB, module string) string {
	tb.Helper()
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			tb.Fatalf("twin: go env GOMODCACHE: %v", err)
		}
		cache = strings.TrimSpace(string(out))
	}
	dir := filepath.Join(cache, module)
	if _, err := os.Stat(dir); err != nil {
		testenv.Missing(tb, module, fmt.Sprintf("%s is not in the module cache", module), "run the tests through make (make test), which builds the twin's binaries and so fills the module cache")
	}
	return dir
}
