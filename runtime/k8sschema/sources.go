package k8sschema

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The modules whose schemas the validator reads, at the versions the
// templates target. `make schemas` downloads them into the module cache
// (from the Go module proxy, like any dependency); tests only read them.
const (
	KubernetesModule = "k8s.io/kubernetes@v1.34.2"
	KEDAModule       = "github.com/kedacore/keda/v2@v2.17.2"
	KarpenterModule  = "github.com/aws/karpenter-provider-aws@v1.10.0"
	PromOpModule     = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)

// Modules lists the modules Load reads.
var Modules = []string{KubernetesModule, KEDAModule, KarpenterModule, PromOpModule}

// ErrMissing means a schema module is not in the module cache.
var ErrMissing = errors.New("schema module not downloaded; run `make schemas`")

// moduleDir returns where the module cache holds mod@version.
func moduleDir(modCache, modVersion string) string {
	path, version, _ := strings.Cut(modVersion, "@")
	// The cache escapes upper-case letters as "!" + lower case.
	var b strings.Builder
	for _, r := range path {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return filepath.Join(modCache, filepath.FromSlash(b.String())+"@"+version)
}

// modCache returns the module cache's folder.
func modCache() (string, error) {
	if dir := os.Getenv("GOMODCACHE"); dir != "" {
		return dir, nil
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ScaledObjectCRD returns the path of KEDA's ScaledObject CRD in the
// module cache, for a test API server that must serve the kind.
func ScaledObjectCRD() (string, error) {
	cache, err := modCache()
	if err != nil {
		return "", err
	}
	p := filepath.Join(moduleDir(cache, KEDAModule), "config", "crd", "bases", "keda.sh_scaledobjects.yaml")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: %s", ErrMissing, p)
	}
	return p, nil
}

// Load returns a validator of every kind the platform's manifests use:
// the built-in kinds of Kubernetes, KEDA's ScaledObject, Karpenter's
// NodePool and EC2NodeClass, and the Prometheus Operator's ServiceMonitor,
// PodMonitor and PrometheusRule.
func Load() (*Validator, error) {
	cache, err := modCache()
	if err != nil {
		return nil, err
	}
	v := New()
	k8s := filepath.Join(moduleDir(cache, KubernetesModule), "api", "openapi-spec", "v3")
	files := []struct {
		path string
		crd  bool
	}{
		{filepath.Join(k8s, "api__v1_openapi.json"), false},
		{filepath.Join(k8s, "apis__apps__v1_openapi.json"), false},
		{filepath.Join(k8s, "apis__policy__v1_openapi.json"), false},
		{filepath.Join(k8s, "apis__rbac.authorization.k8s.io__v1_openapi.json"), false},
		{filepath.Join(moduleDir(cache, KEDAModule), "config", "crd", "bases", "keda.sh_scaledobjects.yaml"), true},
		{filepath.Join(moduleDir(cache, KarpenterModule), "pkg", "apis", "crds", "karpenter.sh_nodepools.yaml"), true},
		{filepath.Join(moduleDir(cache, KarpenterModule), "pkg", "apis", "crds", "karpenter.k8s.aws_ec2nodeclasses.yaml"), true},
	}
	for _, crd := range []string{"servicemonitors", "podmonitors", "prometheusrules"} {
		files = append(files, struct {
			path string
			crd  bool
		}{filepath.Join(moduleDir(cache, PromOpModule), "example", "prometheus-operator-crd", "monitoring.coreos.com_"+crd+".yaml"), true})
	}
	for _, f := range files {
		if _, err := os.Stat(f.path); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrMissing, f.path)
		}
		if f.crd {
			err = v.AddCRD(f.path)
		} else {
			err = v.AddOpenAPI(f.path)
		}
		if err != nil {
			return nil, err
		}
	}
	return v, nil
}

// CRDs returns the paths, in the module cache, of the
// CustomResourceDefinitions the platform's manifests use or may use, for a
// test API server that must serve them: Karpenter's NodePool,
// EC2NodeClass and NodeClaim, KEDA's ScaledObject and
// TriggerAuthentication, and the Prometheus Operator's ServiceMonitor,
// PodMonitor and PrometheusRule. A missing file wraps ErrMissing.
func CRDs() ([]string, error) {
	cache, err := modCache()
	if err != nil {
		return nil, err
	}
	karpenter := filepath.Join(moduleDir(cache, KarpenterModule), "pkg", "apis", "crds")
	keda := filepath.Join(moduleDir(cache, KEDAModule), "config", "crd", "bases")
	promOp := filepath.Join(moduleDir(cache, PromOpModule), "example", "prometheus-operator-crd")
	paths := []string{
		filepath.Join(karpenter, "karpenter.sh_nodepools.yaml"),
		filepath.Join(karpenter, "karpenter.k8s.aws_ec2nodeclasses.yaml"),
		filepath.Join(karpenter, "karpenter.sh_nodeclaims.yaml"),
		filepath.Join(keda, "keda.sh_scaledobjects.yaml"),
		filepath.Join(keda, "keda.sh_triggerauthentications.yaml"),
		filepath.Join(promOp, "monitoring.coreos.com_servicemonitors.yaml"),
		filepath.Join(promOp, "monitoring.coreos.com_podmonitors.yaml"),
		filepath.Join(promOp, "monitoring.coreos.com_prometheusrules.yaml"),
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrMissing, p)
		}
	}
	return paths, nil
}
