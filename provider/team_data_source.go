package provider

import (
	"context"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/llmplat/llmplat/runtime/adminclient"
)

// teamDataSource is llmplat_team: a team by name, with its balance.
type teamDataSource struct {
	client *adminclient.Client
}

func newTeamDataSource() datasource.DataSource { return &teamDataSource{} }

var _ datasource.DataSourceWithConfigure = (*teamDataSource)(nil)

func (d *teamDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_team"
}

func (d *teamDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A team of the platform, found by name, with its credit as of now.",
		Attributes: map[string]schema.Attribute{
			"name":                   schema.StringAttribute{Required: true, MarkdownDescription: "The team's name.", Validators: []validator.String{nameValidator{}}},
			"id":                     schema.StringAttribute{Computed: true, MarkdownDescription: "The team's id."},
			"balance_microcredits":   schema.Int64Attribute{Computed: true, MarkdownDescription: "Credits granted minus costs settled."},
			"reserved_microcredits":  schema.Int64Attribute{Computed: true, MarkdownDescription: "Held by requests still running."},
			"available_microcredits": schema.Int64Attribute{Computed: true, MarkdownDescription: "Balance minus reserved."},
			"self_service_keys": schema.BoolAttribute{Computed: true,
				MarkdownDescription: "Whether the team's members may make and revoke personal keys in the console."},
			"personal_key_max_days": schema.Int64Attribute{Computed: true,
				MarkdownDescription: "The longest life, in days, of a personal key made in the console."},
		},
	}
}

func (d *teamDataSource) Configure(ctx context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = clientFrom(ctx, req.ProviderData, &resp.Diagnostics)
}

func (d *teamDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if !configured(d.client, &resp.Diagnostics) {
		return
	}
	var m teamModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	teams, err := d.client.ListTeams(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Teams not read", err.Error())
		return
	}
	for _, t := range teams {
		if t.Name == m.Name.ValueString() {
			full, err := d.client.GetTeam(ctx, t.ID)
			if err != nil {
				resp.Diagnostics.AddError("Team not read", err.Error())
				return
			}
			m.set(full)
			resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
			return
		}
	}
	resp.Diagnostics.AddAttributeError(path.Root("name"), "No such team", "No team is named "+strconv.Quote(m.Name.ValueString())+".")
}
