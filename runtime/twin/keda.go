package twin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/llmplat/llmplat/runtime/k8sschema"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// The names KEDA's own manifests (its module's config/) give its
// namespace, the adapter's Service and the APIService it serves.
const (
	kedaNamespace  = "keda"
	adapterService = "keda-metrics-apiserver"
	apiServiceName = "v1beta1.external.metrics.k8s.io"
	// adapterPortName is the Service's port the APIService names (443,
	// the default of an APIService's service port).
	adapterPortName = "https"
)

// kedaCRDsReady bounds the wait for KEDA's six CRDs to be served; the
// ScaledObject's schema is among the larger ones there are.
const kedaCRDsReady = 2 * time.Minute

// probeRequestWait bounds one readiness probe's request to an add-on.
const probeRequestWait = 5 * time.Second

// kedaReady bounds KEDA's start: the operator's caches synced and the
// adapter's APIService Available, which the API server checks on its own
// schedule (its availability controller), on a busy machine.
const kedaReady = 3 * time.Minute

// StartKEDA starts KEDA's operator and metrics adapter against the
// cluster's API server, until the test ends: KEDA's CRDs are installed,
// the adapter serves external.metrics.k8s.io through the API server's
// aggregator, so the HPAs the operator creates scale 1→N on the
// ScaledObjects' triggers, and the operator scales 0→1 and N→0 itself,
// at the polling interval and cooldown each ScaledObject sets.
//
// Both run as the cluster's admin user rather than under KEDA's RBAC
// (config/rbac): the twin watches scaling, not KEDA's permissions. Their
// certificates (the operator↔adapter gRPC link, mutual TLS, and the
// adapter's serving certificate the aggregator checks) are made here, for
// the addresses they listen on in the namespace and for their Services'
// names, in milliseconds (BenchmarkKEDACerts). KEDA's own rotation
// (--enable-cert-rotation) names only the Services, which nothing resolves
// in the twin, and writes the operator's folder and a Secret, which the
// adapter, a process here rather than a pod, would not see.
func (c *Cluster) StartKEDA(tb testing.TB) {
	tb.Helper()
	if !c.HasBin(tb, "keda-operator") || !c.HasBin(tb, "keda-adapter") {
		return
	}
	crd, err := k8sschema.ScaledObjectCRD()
	if err != nil {
		testenv.Missing(tb, "KEDA's CRDs", err.Error(), "download the schema modules (make schemas)")
		return
	}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Dir(crd)},
		ErrorIfPathMissing: true, MaxTime: kedaCRDsReady}); err != nil {
		tb.Fatalf("keda: install its CRDs: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), kedaReady)
	defer cancel()
	if _, err = c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kedaNamespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("keda: namespace: %v", err)
	}
	certs, err := c.writeKEDACerts()
	if err != nil {
		tb.Fatalf("keda: certificates: %v", err)
	}
	env := []string{"KUBECONFIG=" + c.Kubeconfig, "WATCH_NAMESPACE=", "POD_NAMESPACE=" + kedaNamespace,
		"KEDA_CLUSTER_OBJECT_NAMESPACE=" + kedaNamespace}

	grpcAddr, probeAddr := freeAddr(tb, addonHost), freeAddr(tb, addonHost)
	operator := c.Start(tb, "keda-operator", c.Bin("keda-operator"), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--metrics-service-bind-address=" + grpcAddr,
		"--metrics-bind-address=" + freeAddr(tb, addonHost),
		"--health-probe-bind-address=" + probeAddr,
		"--cert-dir=" + certs.operator,
		"--ca-dir=" + certs.scalerCAs,
		"--zap-log-level=info",
		"--zap-encoder=console",
	}, env...)

	adapterAddr := freeAddr(tb, addonHost)
	_, portText, _ := net.SplitHostPort(adapterAddr)
	port, _ := strconv.Atoi(portText)
	_, metricsPort, _ := net.SplitHostPort(freeAddr(tb, addonHost))
	if err := c.registerAdapter(ctx, int32(port), certs.ca.CertPEM()); err != nil {
		tb.Fatalf("keda: register the metrics adapter: %v", err)
	}
	adapter := c.Start(tb, "keda-adapter", c.Bin("keda-adapter"), []string{
		"--bind-address=" + addonHost,
		"--secure-port=" + portText,
		"--port=" + metricsPort,             // its own /metrics, on every address
		"--cert-dir=" + certs.adapterClient, // the gRPC client's
		"--tls-cert-file=" + filepath.Join(certs.adapterServing, "tls.crt"),
		"--tls-private-key-file=" + filepath.Join(certs.adapterServing, "tls.key"),
		"--lister-kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--metrics-service-address=" + grpcAddr,
		"--logtostderr=true",
		"--v=0",
	}, env...)

	operator.waitAlive(tb, kedaReady, "a ready answer", func(ctx context.Context) error {
		return httpOK(ctx, "http://"+probeAddr+"/readyz")
	})
	adapter.waitAlive(tb, kedaReady, "its APIService Available", c.apiServiceAvailable)
}

// kedaCerts are the folders of KEDA's certificates, each as KEDA reads
// one (ca.crt, tls.crt, tls.key), all of one CA of the twin's.
type kedaCerts struct {
	ca *CA
	// operator serves the gRPC link; adapterClient is the adapter's end
	// of it (KEDA's gRPC ends check each other's certificate against
	// ca.crt); adapterServing is what the aggregator checks.
	operator, adapterClient, adapterServing string
	// scalerCAs is an empty folder: no extra CAs for the scalers.
	scalerCAs string
}

// writeKEDACerts makes KEDA's certificates for the addresses its
// processes listen on in the namespace, and its Services' names.
func (c *Cluster) writeKEDACerts() (kedaCerts, error) {
	ca, err := NewCA("keda-ca")
	if err != nil {
		return kedaCerts{}, err
	}
	dir := filepath.Join(c.Dir, "keda")
	k := kedaCerts{ca: ca, operator: filepath.Join(dir, "operator"), adapterClient: filepath.Join(dir, "adapter-client"),
		adapterServing: filepath.Join(dir, "adapter-serving"), scalerCAs: filepath.Join(dir, "scaler-cas")}
	for _, d := range []string{k.operator, k.adapterClient, k.adapterServing, k.scalerCAs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return kedaCerts{}, err
		}
	}
	for _, d := range []string{k.operator, k.adapterClient} {
		if err := ca.WriteCert(filepath.Join(d, "ca.crt")); err != nil {
			return kedaCerts{}, err
		}
	}
	pair := func(d string) (string, string) { return filepath.Join(d, "tls.crt"), filepath.Join(d, "tls.key") }
	crt, key := pair(k.operator)
	if err := ca.WriteServingPair(crt, key, addonHost, "keda-operator."+kedaNamespace+".svc"); err != nil {
		return kedaCerts{}, err
	}
	crt, key = pair(k.adapterClient)
	if err := ca.WriteClientPair(crt, key, "keda-metrics-apiserver", nil); err != nil {
		return kedaCerts{}, err
	}
	crt, key = pair(k.adapterServing)
	if err := ca.WriteServingPair(crt, key, adapterService+"."+kedaNamespace+".svc", addonHost); err != nil {
		return kedaCerts{}, err
	}
	return k, nil
}

// apiServiceGVR is where the API server keeps APIServices.
var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// registerAdapter makes the adapter's Service (no selector: no pod backs
// it), its EndpointSlice at the adapter's address in the namespace, which
// the aggregator dials (it routes to endpoints, as no kube-proxy runs),
// and the APIService, as KEDA's config/metrics-server names it, with the
// CA of the adapter's certificate.
func (c *Cluster) registerAdapter(ctx context.Context, port int32, caPEM []byte) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: adapterService, Namespace: kedaNamespace},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Name: adapterPortName, Port: 443}}},
	}
	if _, err := c.Client.CoreV1().Services(kedaNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: adapterService, Namespace: kedaNamespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: adapterService,
			discoveryv1.LabelManagedBy:   "twin.llmplat.io", // not the endpoint controllers': they leave it alone
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addonHost}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(adapterPortName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices(kedaNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("endpointslice: %w", err)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	api := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": apiServiceName},
		"spec": map[string]any{
			"service":              map[string]any{"name": adapterService, "namespace": kedaNamespace},
			"group":                "external.metrics.k8s.io",
			"version":              "v1beta1",
			"groupPriorityMinimum": int64(100),
			"versionPriority":      int64(100),
			"caBundle":             caPEM, // []byte marshals as base64, as the field wants
		},
	}}
	if _, err := dyn.Resource(apiServiceGVR).Create(ctx, api, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("apiservice: %w", err)
	}
	return nil
}

// apiServiceAvailable reports whether the API server has found the
// adapter's APIService reachable.
func (c *Cluster) apiServiceAvailable(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	api, err := dyn.Resource(apiServiceGVR).Get(ctx, apiServiceName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(api.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" {
			if m["status"] == "True" {
				return nil
			}
			return fmt.Errorf("Available %v: %v %v", m["status"], m["reason"], m["message"])
		}
	}
	return errors.New("no Available condition yet")
}

// httpOK gets url and wants 200.
func httpOK(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, probeRequestWait)
	defer cancel()
	return httpGetOK(ctx, url)
}
