package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The kubernetes block's environment fallbacks, named as the kubernetes
// and helm providers name them, so a pipeline set up for those works here.
const (
	EnvKubeConfigPath = "KUBE_CONFIG_PATH"
	EnvKubeContext    = "KUBE_CTX"
	EnvKubeHost       = "KUBE_HOST"
	EnvKubeToken      = "KUBE_TOKEN"
	EnvKubeCA         = "KUBE_CLUSTER_CA_CERT_DATA"
	EnvKubeClientCert = "KUBE_CLIENT_CERT_DATA"
	EnvKubeClientKey  = "KUBE_CLIENT_KEY_DATA"
	EnvKubeInsecure   = "KUBE_INSECURE"
)

// fieldManager owns, in the cluster, the fields this provider applies.
const fieldManager = "terraform-provider-llmplat"

// kubernetesModel is the provider's kubernetes block.
type kubernetesModel struct {
	ConfigPath           types.String `tfsdk:"config_path"`
	ConfigContext        types.String `tfsdk:"config_context"`
	Host                 types.String `tfsdk:"host"`
	Token                types.String `tfsdk:"token"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	Insecure             types.Bool   `tfsdk:"insecure"`
	Exec                 *execModel   `tfsdk:"exec"`
}

// execModel is a credential plugin, such as `aws eks get-token`.
type execModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Args       types.List   `tfsdk:"args"`
	Env        types.Map    `tfsdk:"env"`
}

func kubernetesBlock() schema.SingleNestedBlock {
	str := func(d string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, MarkdownDescription: d}
	}
	secret := func(d string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Sensitive: true, MarkdownDescription: d}
	}
	return schema.SingleNestedBlock{
		MarkdownDescription: "Access to the Kubernetes cluster the models run in, taken as the kubernetes provider takes it. Only " +
			"llmplat_model's deployment needs it; without this block (and without " + EnvKubeConfigPath + " or " + EnvKubeHost +
			") llmplat_model registers models and manages no cluster objects.",
		Attributes: map[string]schema.Attribute{
			"config_path":            str("A kubeconfig file. Falls back to " + EnvKubeConfigPath + "."),
			"config_context":         str("The kubeconfig context to use; default its current context. Falls back to " + EnvKubeContext + "."),
			"host":                   str("The API server's URL (https://…); it overrides the kubeconfig's. Falls back to " + EnvKubeHost + "."),
			"token":                  secret("A bearer token. Falls back to " + EnvKubeToken + "."),
			"cluster_ca_certificate": str("The API server's CA certificate, PEM. Falls back to " + EnvKubeCA + "."),
			"client_certificate":     str("A client certificate, PEM. Falls back to " + EnvKubeClientCert + "."),
			"client_key":             secret("The client certificate's key, PEM. Falls back to " + EnvKubeClientKey + "."),
			"insecure": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "Skip verifying the API server's certificate (never in production). Falls back to " + EnvKubeInsecure + "."},
		},
		Blocks: map[string]schema.Block{
			"exec": schema.SingleNestedBlock{
				MarkdownDescription: "A credential plugin run for each token, for example `aws eks get-token --cluster-name inference`.",
				Attributes: map[string]schema.Attribute{
					"api_version": str("The plugin's API version, for example client.authentication.k8s.io/v1beta1."),
					"command":     str("The plugin's command."),
					"args":        schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Its arguments."},
					"env":         schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Environment variables it is given."},
				},
			},
		},
	}
}

// configured reports whether Kubernetes access was asked for: the block,
// or one of the environment variables that name a cluster.
func (k *kubernetesModel) configured() bool {
	return k != nil || os.Getenv(EnvKubeConfigPath) != "" || os.Getenv(EnvKubeHost) != ""
}

// unknown reports whether a value is known only after another resource's
// apply (a cluster created in the same run).
func (k *kubernetesModel) unknown() bool {
	if k == nil {
		return false
	}
	for _, v := range []types.String{k.ConfigPath, k.ConfigContext, k.Host, k.Token, k.ClusterCACertificate, k.ClientCertificate, k.ClientKey} {
		if v.IsUnknown() {
			return true
		}
	}
	if k.Insecure.IsUnknown() {
		return true
	}
	return k.Exec != nil && (k.Exec.APIVersion.IsUnknown() || k.Exec.Command.IsUnknown() || k.Exec.Args.IsUnknown() || k.Exec.Env.IsUnknown())
}

// restConfig builds the client configuration: the kubeconfig file (if
// any) with the block's explicit settings on top, as clientcmd merges them.
func (k *kubernetesModel) restConfig(ctx context.Context) (*rest.Config, diag.Diagnostics) {
	var diags diag.Diagnostics
	if k == nil {
		k = &kubernetesModel{}
	}
	rules := &clientcmd.ClientConfigLoadingRules{}
	if p := stringOr(k.ConfigPath, os.Getenv(EnvKubeConfigPath)); p != "" {
		if rest, ok := strings.CutPrefix(p, "~/"); ok {
			if home, err := os.UserHomeDir(); err == nil {
				p = filepath.Join(home, rest)
			}
		}
		rules.ExplicitPath = p
	}
	ov := &clientcmd.ConfigOverrides{CurrentContext: stringOr(k.ConfigContext, os.Getenv(EnvKubeContext))}
	ov.ClusterInfo.Server = stringOr(k.Host, os.Getenv(EnvKubeHost))
	if ca := stringOr(k.ClusterCACertificate, os.Getenv(EnvKubeCA)); ca != "" {
		ov.ClusterInfo.CertificateAuthorityData = []byte(ca)
	}
	insecure := k.Insecure.ValueBool()
	if k.Insecure.IsNull() && os.Getenv(EnvKubeInsecure) != "" {
		b, err := strconv.ParseBool(os.Getenv(EnvKubeInsecure))
		if err != nil {
			diags.AddError("Invalid "+EnvKubeInsecure, err.Error())
			return nil, diags
		}
		insecure = b
	}
	ov.ClusterInfo.InsecureSkipTLSVerify = insecure
	ov.AuthInfo.Token = stringOr(k.Token, os.Getenv(EnvKubeToken))
	if c := stringOr(k.ClientCertificate, os.Getenv(EnvKubeClientCert)); c != "" {
		ov.AuthInfo.ClientCertificateData = []byte(c)
	}
	if key := stringOr(k.ClientKey, os.Getenv(EnvKubeClientKey)); key != "" {
		ov.AuthInfo.ClientKeyData = []byte(key)
	}
	if e := k.Exec; e != nil && e.Command.ValueString() != "" {
		x := &clientcmdapi.ExecConfig{APIVersion: e.APIVersion.ValueString(), Command: e.Command.ValueString(),
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		diags.Append(e.Args.ElementsAs(ctx, &x.Args, false)...)
		env := map[string]string{}
		diags.Append(e.Env.ElementsAs(ctx, &env, false)...)
		for name, value := range env {
			x.Env = append(x.Env, clientcmdapi.ExecEnvVar{Name: name, Value: value})
		}
		if diags.HasError() {
			return nil, diags
		}
		ov.AuthInfo.Exec = x
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, ov).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			err = errors.New("no cluster given: set config_path (or " + EnvKubeConfigPath + ") or host (or " + EnvKubeHost + ")")
		}
		diags.AddError("Invalid kubernetes block", err.Error())
		return nil, diags
	}
	cfg.UserAgent = fieldManager
	return cfg, diags
}

// kubeAccess is the provider's connection to the cluster, made on first
// use: planning a model without a deployment never contacts the cluster.
type kubeAccess struct {
	config *rest.Config

	mu     sync.Mutex
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func (k *kubeAccess) clients() (dynamic.Interface, *restmapper.DeferredDiscoveryRESTMapper, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dyn == nil {
		dyn, err := dynamic.NewForConfig(k.config)
		if err != nil {
			return nil, nil, fmt.Errorf("kubernetes client: %w", err)
		}
		disc, err := discovery.NewDiscoveryClientForConfig(k.config)
		if err != nil {
			return nil, nil, fmt.Errorf("kubernetes discovery: %w", err)
		}
		k.dyn, k.mapper = dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	}
	return k.dyn, k.mapper, nil
}

// noKind reports a kind the cluster does not serve (a CRD not installed).
func noKind(err error) bool { return meta.IsNoMatchError(err) }
