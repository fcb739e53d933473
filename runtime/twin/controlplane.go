package twin

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

	"github.com/llmplat/llmplat/runtime/kubetest"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// BinariesEnv names the folder of the twin's cached binaries
// (kube-controller-manager, kube-scheduler, kwok, karpenter-kwok,
// keda-operator, keda-adapter), which make twinbins builds.
const BinariesEnv = "LLMPLAT_TWIN_BINARIES"

// ServiceRange is the cluster's Service address range, as the API server
// and the controller manager are told.
const ServiceRange = "10.0.0.0/24"

// startWait bounds a component's start: seconds on an idle machine; a
// busy 2-core CI machine that starts a dozen processes at once gets
// minutes.
const startWait = 3 * time.Minute

// Options configures a twin.
type Options struct {
	// Scale is the time-scale factor: a real-world duration d lasts
	// d/Scale in the twin (0 or less means 1).
	Scale float64
}

// Cluster is a running twin's control plane.
type Cluster struct {
	// Config and Client reach the API server as its admin.
	Config *rest.Config
	Client kubernetes.Interface
	// Kubeconfig is the path of an admin kubeconfig for the processes.
	Kubeconfig string
	// Dir holds the twin's files: logs, configs, certificates.
	Dir string
	// Scale is the time-scale factor (Options.Scale, at least 1).
	Scale float64

	bins string
	// FrontProxy is the CA the API server trusts for requests an
	// aggregated API server receives through it.
	FrontProxy *CA
}

// quiet silences client-go's and envtest's own logging once.
var quiet sync.Once

// StartControlPlane starts etcd and kube-apiserver (through envtest, with
// the aggregation layer configured), then kube-controller-manager and
// kube-scheduler as processes against it. Everything stops when the test
// ends.
func StartControlPlane(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	if !requireNetns(tb) {
		return nil
	}
	c := &Cluster{Dir: tb.TempDir(), Scale: max(opts.Scale, 1), bins: os.Getenv(BinariesEnv)}
	for _, b := range []string{"kube-controller-manager", "kube-scheduler"} {
		if !c.HasBin(tb, b) {
			return nil
		}
	}
	assets := os.Getenv(kubetest.AssetsEnv)
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); assets == "" || err != nil {
			testenv.Missing(tb, "the Kubernetes API server", fmt.Sprintf("%s has no %s", kubetest.AssetsEnv, b),
				"run the tests through make (make test), which builds and caches kube-apiserver and etcd")
			return nil
		}
	}
	var err error
	quiet.Do(func() {
		klog.SetLogger(logr.Discard())
		ctrllog.SetLogger(logr.Discard())
	})

	if c.FrontProxy, err = NewCA("front-proxy-ca"); err != nil {
		tb.Fatal(err)
	}
	pki := filepath.Join(c.Dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		tb.Fatal(err)
	}
	proxyCA, proxyCert, proxyKey := filepath.Join(pki, "front-proxy-ca.crt"), filepath.Join(pki, "front-proxy-client.crt"), filepath.Join(pki, "front-proxy-client.key")
	if err := c.FrontProxy.WriteCert(proxyCA); err != nil {
		tb.Fatal(err)
	}
	if err := c.FrontProxy.WriteClientPair(proxyCert, proxyKey, "front-proxy-client", nil); err != nil {
		tb.Fatal(err)
	}
	apiCerts := filepath.Join(c.Dir, "apiserver")
	if err := os.MkdirAll(apiCerts, 0o700); err != nil {
		tb.Fatal(err)
	}

	env := &envtest.Environment{BinaryAssetsDirectory: assets,
		ControlPlaneStartTimeout: startWait, ControlPlaneStopTimeout: time.Minute}
	api := env.ControlPlane.GetAPIServer()
	api.CertDir = apiCerts
	apiLog, err := os.Create(filepath.Join(c.Dir, "kube-apiserver.log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer apiLog.Close()
	api.Out, api.Err = apiLog, apiLog
	args := api.Configure()
	// The aggregation layer: the API server proxies an APIService (KEDA's
	// external metrics) to its Service's endpoints, presenting the front
	// proxy's client certificate.
	args.Set("requestheader-client-ca-file", proxyCA)
	args.Set("requestheader-allowed-names", "front-proxy-client")
	args.Set("requestheader-username-headers", "X-Remote-User")
	args.Set("requestheader-group-headers", "X-Remote-Group")
	args.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	args.Set("proxy-client-cert-file", proxyCert)
	args.Set("proxy-client-key-file", proxyKey)
	args.Set("enable-aggregator-routing", "true")
	args.Set("service-cluster-ip-range", ServiceRange)
	// The namespace has no default route for the API server to pick its
	// address from: it advertises the namespace's own.
	args.Set("advertise-address", hostAddr.String())
	if c.Config, err = env.Start(); err != nil {
		out, _ := os.ReadFile(apiLog.Name())
		tb.Fatalf("twin: start the API server: %v; its output:\n%s", err, tail(out, logTail))
	}
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Errorf("twin: stop the API server: %v", err)
		}
	})
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		tb.Fatal(err)
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, c.Config); err != nil {
		tb.Fatal(err)
	}

	kcm := c.Start(tb, "kube-controller-manager", c.Bin("kube-controller-manager"), c.controllerManagerArgs(apiCerts))
	sched := c.Start(tb, "kube-scheduler", c.Bin("kube-scheduler"), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(freePort(tb)),
	})
	// The controller manager publishes the root CA into every namespace
	// once its controllers run; the scheduler answers its health check.
	kcm.waitAlive(tb, startWait, "the root CA published in namespace default", func(ctx context.Context) error {
		_, err := c.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
	sched.waitAlive(tb, startWait, "a healthy answer", func(ctx context.Context) error {
		return probeHealth(ctx, sched)
	})
	return c
}

// controllerManagerArgs are kube-controller-manager's flags: every
// controller, pods' node ranges carved from PodRange (KWOK hands out pod
// addresses from its node's range), and the autoscaler's periods on the
// twin's time scale.
func (c *Cluster) controllerManagerArgs(apiCerts string) []string {
	return []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--controllers=*",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + filepath.Join(apiCerts, "sa-signer.key"),
		"--root-ca-file=" + filepath.Join(apiCerts, "apiserver.crt"),
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + PodRange.String(),
		"--node-cidr-mask-size=24",
		"--service-cluster-ip-range=" + ServiceRange,
		// The HPA's loop (15 s in production) and the wait before a new
		// pod's metrics count (30 s), on the twin's clock.
		"--horizontal-pod-autoscaler-sync-period=" + c.Seconds(15*time.Second).String(),
		"--horizontal-pod-autoscaler-initial-readiness-delay=" + c.Seconds(30*time.Second).String(),
		"--concurrent-deployment-syncs=10",
	}
}

// Dur is a real-world duration on the twin's clock.
func (c *Cluster) Dur(d time.Duration) time.Duration { return time.Duration(float64(d) / c.Scale) }

// Seconds is Dur rounded to whole seconds, at least one: for settings
// that count in seconds (KEDA's polling, the HPA's periods).
func (c *Cluster) Seconds(d time.Duration) time.Duration {
	return time.Duration(max(1, math.Round(c.Dur(d).Seconds()))) * time.Second
}

// Real is a twin duration in real-world time, for reports.
func (c *Cluster) Real(d time.Duration) time.Duration { return time.Duration(float64(d) * c.Scale) }

// Bin is the path of the twin's binary name.
func (c *Cluster) Bin(name string) string { return filepath.Join(c.bins, name) }

// HasBin reports whether the twin's binary name is built, and reports it
// missing (a skip, a failure under CI=true) when it is not.
func (c *Cluster) HasBin(tb testing.TB, name string) bool {
	tb.Helper()
	if _, err := os.Stat(c.Bin(name)); c.bins == "" || err != nil {
		testenv.Missing(tb, "the cluster twin's "+name, fmt.Sprintf("%s=%q has no %s", BinariesEnv, c.bins, name),
			"run the tests through make (make test), which builds and caches the twin's binaries")
		return false
	}
	return true
}

// writeKubeconfig writes an admin kubeconfig for cfg at path.
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["twin"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["twin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["twin"] = &clientcmdapi.Context{Cluster: "twin", AuthInfo: "twin", Namespace: corev1.NamespaceDefault}
	kc.CurrentContext = "twin"
	return clientcmd.WriteToFile(*kc, path)
}

// probeHealth asks a component's secure port for /healthz.
func probeHealth(ctx context.Context, p *Process) error {
	port := ""
	for _, a := range p.cmd.Args {
		if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
			port = v
		}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // a self-signed serving certificate on loopback
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+port+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: %s", resp.Status)
	}
	return nil
}
