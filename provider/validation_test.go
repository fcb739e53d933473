package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminrules"
	"github.com/llmplat/llmplat/runtime/adminwire"
)

// refusalCase is one value the admin API refuses: the configuration that
// gives it, the attribute it must be refused at, and the same value sent
// to the admin API.
type refusalCase struct {
	name string
	hcl  string // one resource
	attr string // the attribute line terraform must point at
	msg  string // what both the plan and the API say
	api  func(ctx context.Context, c *adminclient.Client) error
}

// keyHCL is an llmplat_api_key with one more line.
func keyHCL(line string) string {
	return "resource \"llmplat_api_key\" \"k\" {\n  team_id = \"1\"\n  " + line + "\n}\n"
}

// createKey sends a key create to the admin API.
func createKey(r adminwire.CreateKeyRequest) func(context.Context, *adminclient.Client) error {
	return func(ctx context.Context, c *adminclient.Client) error {
		if r.TeamID == 0 {
			r.TeamID = 1
		}
		_, err := c.CreateKey(ctx, r, "")
		return err
	}
}

// modelHCL is an llmplat_model with served_name, max_context_tokens and
// max_output_tokens as given.
func modelHCL(served string, maxContext, output int64) string {
	return fmt.Sprintf(`resource "llmplat_model" "m" {
  name                            = "refused"
  served_name                     = %q
  prompt_price_micro_per_mtok     = 1
  completion_price_micro_per_mtok = 1
  max_context_tokens              = %d
  max_output_tokens               = %d
}
`, served, maxContext, output)
}

// putModel sends a model declaration to the admin API.
func putModel(served string, maxContext, output int) func(context.Context, *adminclient.Client) error {
	return func(ctx context.Context, c *adminclient.Client) error {
		_, _, err := c.PutModel(ctx, "refused", adminwire.ModelSpec{ServedName: served, PromptPriceMicroPerMTok: 1,
			CompletionPriceMicroPerMTok: 1, MaxContextTokens: maxContext, MaxOutputTokens: output})
		return err
	}
}

// creditHCL is an llmplat_credit with amount and note as given.
func creditHCL(amount int64, note string) string {
	return fmt.Sprintf("resource \"llmplat_credit\" \"c\" {\n  team_id             = \"1\"\n  amount_microcredits = %d\n  note                = %q\n}\n", amount, note)
}

// addCredit sends a credit grant to the admin API.
func addCredit(amount int64, note string) func(context.Context, *adminclient.Client) error {
	return func(ctx context.Context, c *adminclient.Client) error {
		_, err := c.AddCredit(ctx, adminwire.CreditRequest{TeamID: 1, AmountMicrocredits: amount, Note: note, IdempotencyKey: "refusal-test"})
		return err
	}
}

var refusalCases = []refusalCase{
	{"rpm over 2^31-1", keyHCL("rpm = 2147483648"), "rpm", "rpm must be between 0 (unlimited) and 2147483647",
		createKey(adminwire.CreateKeyRequest{RPM: math.MaxInt32 + 1})},
	{"max_streams over 2^31-1", keyHCL("max_streams = 2147483648"), "max_streams", "max_streams must be between 0 (unlimited) and 2147483647",
		createKey(adminwire.CreateKeyRequest{MaxStreams: math.MaxInt32 + 1})},
	{"max_tokens over 2^31-1", keyHCL("max_tokens = 2147483648"), "max_tokens", "max_tokens must be between 0 (unlimited) and 2147483647",
		createKey(adminwire.CreateKeyRequest{MaxTokens: math.MaxInt32 + 1})},
	{"key name too long", keyHCL(fmt.Sprintf("name = %q", strings.Repeat("n", adminrules.MaxKeyNameLen+1))), "name",
		"name must be at most 200 bytes", createKey(adminwire.CreateKeyRequest{Name: strings.Repeat("n", adminrules.MaxKeyNameLen+1)})},
	{"key name with a control character", keyHCL(`name = "ci\nkey"`), "name", "name must not contain control characters",
		createKey(adminwire.CreateKeyRequest{Name: "ci\nkey"})},
	{"allowlist entry not a model name", keyHCL(`model_allowlist = ["meta/llama"]`), "model_allowlist",
		`model name "meta/llama" must be 1 to 64 letters`, createKey(adminwire.CreateKeyRequest{ModelAllowlist: []string{"meta/llama"}})},
	{"team_id not numeric", `resource "llmplat_api_key" "k" {
  team_id = "team-a"
}
`, "team_id", "team_id must be a positive team id", createKey(adminwire.CreateKeyRequest{TeamID: -1})},
	{"credit over the bound", creditHCL(adminrules.MaxCreditMicro+1, "big"), "amount_microcredits",
		"amount_microcredits must be non-zero and at most 1000000000000000 in absolute value", addCredit(adminrules.MaxCreditMicro+1, "big")},
	{"credit of zero", creditHCL(0, "none"), "amount_microcredits",
		"amount_microcredits must be non-zero and at most 1000000000000000 in absolute value", addCredit(0, "none")},
	{"credit note with a control character", creditHCL(5, "a\tb"), "note", "note must not contain control characters", addCredit(5, "a\tb")},
	{"served_name with a space", modelHCL("meta llama", 8192, 1024), "served_name",
		"served_name must be 1 to 256 characters without spaces", putModel("meta llama", 8192, 1024)},
	{"max_context_tokens over 2^31-1", modelHCL("m", math.MaxInt32+1, 1024), "max_context_tokens",
		"max_context_tokens must be a positive 32-bit integer", putModel("m", math.MaxInt32+1, 1024)},
	{"max_output_tokens over max_context_tokens", modelHCL("m", 8192, 8193), "max_output_tokens",
		"max_output_tokens must not exceed max_context_tokens", putModel("m", 8192, 8193)},
}

// TestAccPlanRefusesWhatTheAPIRefuses: each value the admin API refuses
// fails `terraform plan` (no apply is run) with the API's own message,
// at the attribute that gives it; and the API refuses the same value with
// the same message, since both check it with runtime/adminrules.
func TestAccPlanRefusesWhatTheAPIRefuses(t *testing.T) {
	p := startPlatform(t)
	for _, tt := range refusalCases {
		t.Run(tt.name, func(t *testing.T) {
			// The API's answer, first: the rule the plan must apply.
			err := tt.api(t.Context(), p.client)
			var apiErr *adminwire.APIError
			if !errors.As(err, &apiErr) || apiErr.Param != tt.attr || !strings.Contains(apiErr.Message, tt.msg) {
				t.Fatalf("admin API answered %v, want a refusal of %s saying %q", err, tt.attr, tt.msg)
			}
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps: []resource.TestStep{{
					Config:      p.providerBlock() + tt.hcl,
					PlanOnly:    true,
					ExpectError: atAttribute("Value the platform refuses", tt.attr, tt.msg),
				}},
			})
		})
	}
}

// atAttribute matches terraform's report of an error whose source line is
// attr's (an error on the resource block shows the block's first line)
// and whose detail holds msg; an empty attr checks no source line.
func atAttribute(summary, attr, msg string) *regexp.Regexp {
	words := strings.Fields(msg)
	for i, w := range words {
		words[i] = regexp.QuoteMeta(w)
	}
	at := `.*\d+:\s+` + regexp.QuoteMeta(attr) + `\s*=`
	if attr == "" {
		at = ""
	}
	return regexp.MustCompile(`(?s)Error: ` + regexp.QuoteMeta(summary) + at + `.*` + strings.Join(words, `[\s│]+`))
}

// nodeHCL is an llmplat_onprem_node with the orchestrator URL and models
// as given.
func nodeHCL(url, models string) string {
	return fmt.Sprintf(`resource "llmplat_onprem_node" "n" {
  node_id          = "gpu-9"
  orchestrator_url = %q
  models           = %s
}
`, url, models)
}

// nodeModel is one element of a node's models.
func nodeModel(served, kvTokens string) string {
	return fmt.Sprintf(`[{
    name = "m", served_name = %q, max_num_seqs = 4, max_model_len = 4096, kv_cache_tokens = %s
  }]`, served, kvTokens)
}

// planRefusal is a configuration whose plan must fail at attr.
type planRefusal struct {
	name, hcl, summary, attr, msg string
}

// TestAccPlanRefusesWhatTheAgentRefuses: an llmplat_onprem_node whose
// agent command the node agent would refuse (its flags are parsed with the
// agent's own rules, runtime/agentflags) fails `terraform plan` at the
// attribute.
func TestAccPlanRefusesWhatTheAgentRefuses(t *testing.T) {
	const wss = "wss://orch.example/v1/nodes/connect"
	const summary = "Agent command the node agent refuses"
	runPlanRefusals(t, []planRefusal{
		{"empty orchestrator_url", nodeHCL("", nodeModel("m", "1000")), summary, "orchestrator_url", `server URL "" must be ws:// or wss://`},
		{"http orchestrator_url", nodeHCL("http://orch.example/v1/nodes/connect", nodeModel("m", "1000")), summary, "orchestrator_url",
			"must be ws:// or wss:// with a host"},
		{"orchestrator_url not a url", nodeHCL("not a url", nodeModel("m", "1000")), summary, "orchestrator_url", `server URL "not a url" must be`},
		{"served_name with a comma", nodeHCL(wss, nodeModel("a,b=c", "1000")), summary, "models", `unknown key "b"`},
		{"no models", nodeHCL(wss, "[]"), summary, "models", "at least one model is required"},
	})
}

// TestAccPlanRefusesNumbersThatAreNotInt64: a number Terraform holds but
// an int64 cannot fails `terraform plan` at the attribute with our
// message, not the framework's conversion error.
func TestAccPlanRefusesNumbersThatAreNotInt64(t *testing.T) {
	runPlanRefusals(t, []planRefusal{
		{"rpm of 1.5", keyHCL("rpm = 1.5"), "Not a whole number", "rpm", "rpm must be a whole number; got 1.5."},
		{"rpm of 2^63", keyHCL("rpm = 9223372036854775808"), "Number out of range", "rpm",
			"rpm must be between -9223372036854775808 and 9223372036854775807; got 9223372036854775808."},
		{"credit of 0.5", strings.Replace(creditHCL(1, "half"), "= 1\n", "= 0.5\n", 1), "Not a whole number", "amount_microcredits",
			"amount_microcredits must be a whole number; got 0.5."},
		// Terraform shows the resource block for an attribute inside a
		// list's object, so the message names the path.
		{"nested kv_cache_tokens of 1.5", nodeHCL("wss://orch.example/v1/nodes/connect", nodeModel("m", "1.5")), "Not a whole number", "",
			"models[0].kv_cache_tokens must be a whole number; got 1.5."},
	})
}

// runPlanRefusals runs each case's plan against a platform and expects
// its refusal.
func runPlanRefusals(t *testing.T, cases []planRefusal) {
	t.Helper()
	p := startPlatform(t)
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps: []resource.TestStep{{
					Config:      p.providerBlock() + tt.hcl,
					PlanOnly:    true,
					ExpectError: atAttribute(tt.summary, tt.attr, tt.msg),
				}},
			})
		})
	}
}

// nodeSpec is a node declaration the admin API accepts, edited by edit.
func nodeSpec(edit func(*adminwire.NodeDeclarationSpec)) func(context.Context, *adminclient.Client) error {
	return func(ctx context.Context, c *adminclient.Client) error {
		s := adminwire.NodeDeclarationSpec{OrchestratorURL: "wss://orch.example/v1/nodes/connect",
			Models: []adminwire.NodeDeclaredModel{{Name: "m", ServedName: "m", MaxNumSeqs: 4, MaxModelLen: 4096, KVCacheTokens: 1000}}}
		edit(&s)
		_, err := c.PutNodeDeclaration(ctx, "gpu-9", s)
		return err
	}
}

// TestAccPlanRefusesNodeDeclarationsTheAPIRefuses: an llmplat_onprem_node
// whose declaration the admin API refuses (runtime/adminrules) fails
// `terraform plan` with the API's own message; they passed the plan and
// failed at apply. Terraform shows an attribute inside the models list at
// the resource block, so those cases check no source line.
func TestAccPlanRefusesNodeDeclarationsTheAPIRefuses(t *testing.T) {
	const wss = "wss://orch.example/v1/nodes/connect"
	withLine := func(line string) string {
		return strings.Replace(nodeHCL(wss, nodeModel("m", "1000")), "\n}\n", "\n  "+line+"\n}\n", 1)
	}
	p := startPlatform(t)
	for _, tt := range []struct {
		name, hcl, attr, param, msg string
		api                         func(context.Context, *adminclient.Client) error
	}{
		{"served_name with a space", nodeHCL(wss, nodeModel("meta llama", "1000")), "", "models[0].served_name",
			"served_name must be 1 to 256 characters without spaces",
			nodeSpec(func(s *adminwire.NodeDeclarationSpec) { s.Models[0].ServedName = "meta llama" })},
		{"kv_cache_tokens over 2^31-1", nodeHCL(wss, nodeModel("m", "2147483648")), "", "models[0].kv_cache_tokens",
			"kv_cache_tokens must be 1 to 2147483647",
			nodeSpec(func(s *adminwire.NodeDeclarationSpec) { s.Models[0].KVCacheTokens = math.MaxInt32 + 1 })},
		{"gpu_count over 2^31-1", withLine("gpu_count = 2147483648"), "gpu_count", "gpu_count", "gpu_count must be 1 to 2147483647",
			nodeSpec(func(s *adminwire.NodeDeclarationSpec) { n := int64(math.MaxInt32 + 1); s.GPUCount = &n })},
		{"a control character in a label", withLine(`labels = { site = "fra\u0001" }`), "labels", "labels",
			"without control characters",
			nodeSpec(func(s *adminwire.NodeDeclarationSpec) { s.Labels = map[string]string{"site": "fra\x01"} })},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.api(t.Context(), p.client)
			var apiErr *adminwire.APIError
			if !errors.As(err, &apiErr) || apiErr.Param != tt.param || !strings.Contains(apiErr.Message, tt.msg) {
				t.Fatalf("admin API answered %v, want a refusal of %s saying %q", err, tt.param, tt.msg)
			}
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps: []resource.TestStep{{
					Config:      p.providerBlock() + tt.hcl,
					PlanOnly:    true,
					ExpectError: atAttribute("Value the platform refuses", tt.attr, tt.msg),
				}},
			})
		})
	}
}
