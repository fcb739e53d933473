// Package kubetest starts a real Kubernetes API server (kube-apiserver and
// etcd, through controller-runtime's envtest) for a test. The binaries are
// built from the module proxy by `make kubetest` into a cache folder keyed
// by their versions, which the make targets pass in KUBEBUILDER_ASSETS;
// nothing is downloaded at test time. Without them a test is skipped, and
// fails under CI=true, as with PostgreSQL and Redis. Env.DryRun asks the
// server to admit objects (strict field validation, CRD schemas and CEL
// rules) without storing them.
package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// AssetsEnv names the folder holding kube-apiserver and etcd.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// Namespace is the namespace Start creates for the test.
const Namespace = "llmplat"

// crdReady bounds the wait for the CRDs given to Start to be served:
// envtest's default (10 s) leaves little room for eight CRDs, the
// Prometheus Operator's among the largest there are, on a loaded machine.
const crdReady = 2 * time.Minute

// Env is a private API server with the namespace Namespace.
type Env struct {
	Config    *rest.Config
	Client    kubernetes.Interface
	Namespace string
}

var quiet sync.Once

// Start starts an API server of the test's own, stopped when the test
// ends: a server idling on after its tests would only load the machine.
// It serves the CustomResourceDefinitions in crds (YAML files) as well.
func Start(tb testing.TB, crds ...string) Env {
	tb.Helper()
	dir := os.Getenv(AssetsEnv)
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); dir == "" || err != nil {
			testenv.Missing(tb, "the Kubernetes API server", fmt.Sprintf("%s has no %s (%s=%q)", AssetsEnv, bin, AssetsEnv, dir),
				"run the tests through make (make test), which builds and caches kube-apiserver and etcd")
			return Env{}
		}
	}
	quiet.Do(func() {
		// client-go's leader election and informers, and envtest, log
		// through klog and logr: tests read their own results instead.
		klog.SetLogger(logr.Discard())
		ctrllog.SetLogger(logr.Discard())
	})
	env := &envtest.Environment{BinaryAssetsDirectory: dir,
		ControlPlaneStartTimeout: 3 * time.Minute, ControlPlaneStopTimeout: time.Minute,
		CRDInstallOptions: envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true, MaxTime: crdReady}}
	cfg, err := env.Start()
	if err != nil {
		tb.Fatalf("kubetest: start the API server: %v", err)
	}
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Errorf("kubetest: stop the API server: %v", err)
		}
	})
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("kubetest: create namespace %s: %v", Namespace, err)
	}
	return Env{Config: cfg, Client: client, Namespace: Namespace}
}

// Kubeconfig writes a kubeconfig file for the API server (its admin user,
// context "kubetest") into a folder of the test's and returns its path.
func (e Env) Kubeconfig(tb testing.TB) string {
	tb.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData}
	cfg.AuthInfos["kubetest"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.Config.CertData,
		ClientKeyData: e.Config.KeyData, Token: e.Config.BearerToken}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "kubetest", Namespace: e.Namespace}
	cfg.CurrentContext = "kubetest"
	p := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		tb.Fatalf("kubetest: write kubeconfig: %v", err)
	}
	return p
}
