package provider

import (
	"context"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/adminclient"
)

// Environment variables the provider falls back to.
const (
	EnvEndpoint     = "LLMPLAT_ENDPOINT"
	EnvToken        = "LLMPLAT_ADMIN_TOKEN"
	EnvReadyTimeout = "LLMPLAT_READY_TIMEOUT"
)

// requestTimeout bounds one admin API call; the client retries within it.
const requestTimeout = 60 * time.Second

// defaultReadyTimeout is how long configuring waits for the platform to
// answer: 10 min covers a first full apply, whose gateway starts (image
// pull, database migration, load balancer target registration) after the
// cluster, in the same run.
const defaultReadyTimeout = 10 * time.Minute

// New returns the provider factory for version.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &llmplatProvider{version: version} }
}

var _ provider.ProviderWithEphemeralResources = (*llmplatProvider)(nil)

type llmplatProvider struct {
	version string
}

type providerModel struct {
	Endpoint     types.String     `tfsdk:"endpoint"`
	Token        types.String     `tfsdk:"token"`
	ReadyTimeout types.String     `tfsdk:"ready_timeout"`
	Strict       types.Bool       `tfsdk:"strict"`
	Kubernetes   *kubernetesModel `tfsdk:"kubernetes"`
}

// providerData is what the provider hands its resources and data sources.
type providerData struct {
	client *adminclient.Client
	// readiness is the credentials check, made on first use of client.
	readiness *readiness
	// kube is the cluster's access; nil when the provider was given none.
	kube *kubeAccess
	// strict makes a plan's checks against the platform errors, not
	// warnings (the strict option, on unless set to false).
	strict bool

	// warned holds the summaries of the warnings given once per terraform
	// command (see warnOnce).
	warnMu sync.Mutex
	warned map[string]bool

	// keyCreates holds the Idempotency-Keys of the key creates this
	// terraform command sent (see keyCreateKey).
	keyCreatesMu sync.Mutex
	keyCreates   map[string]bool
}

// warnOnce adds the warning to diags the first time this terraform command
// gives it: each resource's destroy is a call of its own, and destroying a
// hundred teams should say once, not a hundred times, that the platform
// keeps them. The warning attaches to the first resource, so its detail
// speaks of every one. A nil d (no provider data) always warns.
func (d *providerData) warnOnce(diags *diag.Diagnostics, summary, detail string) {
	if d != nil {
		d.warnMu.Lock()
		seen := d.warned[summary]
		if d.warned == nil {
			d.warned = map[string]bool{}
		}
		d.warned[summary] = true
		d.warnMu.Unlock()
		if seen {
			return
		}
	}
	diags.AddWarning(summary, detail)
}

func (p *llmplatProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "llmplat"
	resp.Version = p.version
}

func (p *llmplatProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Manages an llmplat platform through its admin API: teams, credits, API keys, models and on-premises nodes, " +
			"and the models' Kubernetes objects.",
		Blocks: map[string]schema.Block{"kubernetes": kubernetesBlock()},
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "Base URL of the platform's gateway, whose admin API is under /admin (for example http://127.0.0.1:8080). Falls back to the " + EnvEndpoint + " environment variable.",
			},
			"token": schema.StringAttribute{
				Optional:            true,
				Sensitive:           true,
				MarkdownDescription: "An admin credential: the bootstrap admin token or an admin JWT. Falls back to the " + EnvToken + " environment variable.",
			},
			"strict": schema.BoolAttribute{
				Optional: true,
				MarkdownDescription: "Whether an `llmplat_api_key`'s `model_allowlist` naming a model the platform does not declare fails the " +
					"plan (the default, true) or only warns (false). The check runs when the list is set or changed; a model created " +
					"in the same apply is named by its id (`llmplat_model.<name>.id`), unknown until then, so the check of it waits for the apply.",
			},
			"ready_timeout": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "How long configuring waits for the platform, as a Go duration (\"90s\", \"10m\"); default " +
					defaultReadyTimeout.String() + ", enough for a first full apply whose gateway starts in the same run. Once endpoint and " +
					"token are known, before the first resource or data source that calls the admin API (a plan of new resources " +
					"included; the offline data sources llmplat_capacity_plan and llmplat_platform_manifests call nothing), the provider " +
					"makes one cheap authenticated call and repeats it while the platform is not there (connection errors, a host name " +
					"that does not resolve yet, 429, 502, 503, 504): a plan or apply against a platform that is down fails after this long. " +
					"A wrong token fails at once, and so does a connection refused at an IP address or localhost, where no load " +
					"balancer can be on its way. " +
					"While endpoint or token are unknown (they come from a resource not applied yet), the check waits for the apply. " +
					"Falls back to the " + EnvReadyTimeout + " environment variable.",
				Validators: []validator.String{durationValidator{}},
			},
		},
	}
}

func (p *llmplatProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Endpoint.IsUnknown() || cfg.Token.IsUnknown() || cfg.ReadyTimeout.IsUnknown() || cfg.Strict.IsUnknown() || cfg.Kubernetes.unknown() {
		// Known only after another resource's apply: configure then.
		return
	}
	endpoint := stringOr(cfg.Endpoint, os.Getenv(EnvEndpoint))
	token := stringOr(cfg.Token, os.Getenv(EnvToken))
	if endpoint == "" {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Missing llmplat endpoint",
			"Set endpoint in the provider block or the "+EnvEndpoint+" environment variable to the gateway's base URL.")
	}
	if token == "" {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Missing llmplat admin token",
			"Set token in the provider block or the "+EnvToken+" environment variable to an admin credential.")
	}
	if resp.Diagnostics.HasError() {
		return
	}
	client, err := adminclient.NewClient(endpoint, token, &http.Client{Timeout: requestTimeout,
		Transport: &apiTransport{next: http.DefaultTransport, userAgent: userAgent(p.version, req.TerraformVersion)}})
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Invalid llmplat endpoint", err.Error())
		return
	}
	ready, err := readyTimeout(cfg.ReadyTimeout)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("ready_timeout"), "Invalid ready_timeout", err.Error())
		return
	}
	data := &providerData{client: client, readiness: &readiness{client: client, endpoint: endpoint, timeout: ready},
		strict: cfg.Strict.IsNull() || cfg.Strict.ValueBool()}
	if cfg.Kubernetes.configured() {
		rc, diags := cfg.Kubernetes.restConfig(ctx)
		resp.Diagnostics.Append(diags...)
		if diags.HasError() {
			return
		}
		data.kube = &kubeAccess{config: rc}
	}
	resp.ResourceData, resp.DataSourceData = data, data
}

func (p *llmplatProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newTeamResource, newCreditResource, newAPIKeyResource, newOnpremNodeResource, newModelResource}
}

func (p *llmplatProvider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{newKeyMaterial}
}

func (p *llmplatProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newCapacityPlanDataSource, newTeamDataSource, newModelsDataSource, newPlatformManifestsDataSource}
}

// stringOr is v's value, or fallback when v is null or empty.
func stringOr(v types.String, fallback string) string {
	if v.IsNull() || v.ValueString() == "" {
		return fallback
	}
	return v.ValueString()
}
