package provider

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestKubernetesBlock: the provider's kubernetes block builds the client
// configuration the kubernetes provider would: a kubeconfig and its
// context, a host with a token and CA, a credential plugin, the KUBE_*
// environment fallbacks, and a clear error when no cluster is named.
func TestKubernetesBlock(t *testing.T) {
	for _, env := range []string{EnvKubeConfigPath, EnvKubeContext, EnvKubeHost, EnvKubeToken, EnvKubeCA,
		EnvKubeClientCert, EnvKubeClientKey, EnvKubeInsecure} {
		t.Setenv(env, "")
	}
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: from-file}
contexts:
- name: a
  context: {cluster: a, user: u}
- name: b
  context: {cluster: b, user: u}
current-context: a
`), 0o600); err != nil {
		t.Fatal(err)
	}
	str := types.StringValue
	t.Run("kubeconfig and context", func(t *testing.T) {
		cfg, diags := (&kubernetesModel{ConfigPath: str(kubeconfig), ConfigContext: str("b")}).restConfig(t.Context())
		if diags.HasError() || cfg.Host != "https://b.example:6443" || cfg.BearerToken != "from-file" {
			t.Fatalf("config %+v, %v; want context b's cluster with the file's token", cfg, diags)
		}
	})
	t.Run("host over the kubeconfig", func(t *testing.T) {
		cfg, diags := (&kubernetesModel{ConfigPath: str(kubeconfig), Host: str("https://c.example"), Token: str("tok")}).restConfig(t.Context())
		if diags.HasError() || cfg.Host != "https://c.example" || cfg.BearerToken != "tok" {
			t.Fatalf("config %+v, %v; want the block's host and token", cfg, diags)
		}
	})
	t.Run("host, token and CA", func(t *testing.T) {
		cfg, diags := (&kubernetesModel{Host: str("https://eks.example"), Token: str("tok"),
			ClusterCACertificate: str("-----BEGIN CERTIFICATE-----")}).restConfig(t.Context())
		if diags.HasError() || cfg.Host != "https://eks.example" || cfg.BearerToken != "tok" ||
			string(cfg.CAData) != "-----BEGIN CERTIFICATE-----" || cfg.UserAgent != fieldManager {
			t.Fatalf("config %+v, %v", cfg, diags)
		}
	})
	t.Run("exec plugin", func(t *testing.T) {
		args, _ := types.ListValueFrom(t.Context(), types.StringType, []string{"eks", "get-token", "--cluster-name", "inference"})
		env, _ := types.MapValueFrom(t.Context(), types.StringType, map[string]string{"AWS_PROFILE": "platform"})
		cfg, diags := (&kubernetesModel{Host: str("https://eks.example"), Exec: &execModel{
			APIVersion: str("client.authentication.k8s.io/v1beta1"), Command: str("aws"), Args: args, Env: env}}).restConfig(t.Context())
		if diags.HasError() {
			t.Fatal(diags)
		}
		x := cfg.ExecProvider
		if x == nil || x.Command != "aws" || !slices.Equal(x.Args, []string{"eks", "get-token", "--cluster-name", "inference"}) ||
			x.APIVersion != "client.authentication.k8s.io/v1beta1" || x.InteractiveMode != clientcmdapi.NeverExecInteractiveMode ||
			len(x.Env) != 1 || x.Env[0] != (clientcmdapi.ExecEnvVar{Name: "AWS_PROFILE", Value: "platform"}) {
			t.Fatalf("exec %+v", x)
		}
	})
	t.Run("environment fallbacks", func(t *testing.T) {
		t.Setenv(EnvKubeHost, "https://env.example")
		t.Setenv(EnvKubeToken, "env-token")
		t.Setenv(EnvKubeInsecure, "true")
		var none *kubernetesModel
		if !none.configured() {
			t.Fatal(EnvKubeHost + " set, yet no Kubernetes access")
		}
		cfg, diags := none.restConfig(t.Context())
		if diags.HasError() || cfg.Host != "https://env.example" || cfg.BearerToken != "env-token" || !cfg.Insecure {
			t.Fatalf("config %+v, %v; want the environment's", cfg, diags)
		}
	})
	t.Run("nothing named", func(t *testing.T) {
		if (*kubernetesModel)(nil).configured() {
			t.Fatal("no block and no environment, yet Kubernetes access")
		}
		_, diags := (&kubernetesModel{}).restConfig(t.Context())
		if !diags.HasError() || !strings.Contains(diags[0].Detail(), "no cluster given") {
			t.Fatalf("diagnostics %v, want no cluster given", diags)
		}
	})
}
