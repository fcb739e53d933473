package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

func nodeConfig(p *platform, wsURL string, seqs int) string {
	return nodeConfigAt(p, wsURL, seqs, "basement")
}

// nodeConfigAt is nodeConfig with the node's site label.
func nodeConfigAt(p *platform, wsURL string, seqs int, site string) string {
	return p.providerBlock() + fmt.Sprintf(`
resource "llmplat_onprem_node" "n" {
  node_id          = "rack1-gpu3"
  orchestrator_url = %q
  engine_url       = %q
  gpu_count        = 2
  labels           = { site = %q }
  models = [{
    name            = %q
    served_name     = %q
    max_num_seqs    = %d
    max_model_len   = 8192
    kv_cache_tokens = 200000
  }]
}
`, wsURL, p.engine, site, testModel, testModel, seqs)
}

// TestAccOnpremNode: the token Terraform issues registers a real node
// agent; /admin/nodes shows the node's labels and declared GPU count; a
// change of the model's limits and labels updates the agent's command line
// and the platform's declaration in place with the same token; an import
// by node id reads back every attribute but the token, plans empty, and
// generates configuration that plans empty; destroying the node revokes
// its token, disconnects the connected agent and deletes its declaration.
func TestAccOnpremNode(t *testing.T) {
	p := startPlatform(t)
	ws := p.WSURL
	var (
		tokenID  string
		stop     context.CancelFunc
		agentRun sync.WaitGroup
	)
	t.Cleanup(func() {
		if stop != nil {
			stop()
		}
		agentRun.Wait()
	})
	attr := func(s *terraform.State, a string) string {
		return s.RootModule().Resources["llmplat_onprem_node.n"].Primary.Attributes[a]
	}
	waitFor := func(what string, cond func() bool) error {
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("timed out waiting for %s", what)
			}
		}
		return nil
	}
	registered := func() bool {
		n, err := p.Registry.Get(context.Background(), "rack1-gpu3")
		return err == nil && n.Owner == p.Replicas[0].ID
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		CheckDestroy: func(*terraform.State) error {
			if err := waitFor("the agent of the destroyed node to be disconnected", func() bool { return !registered() }); err != nil {
				return err
			}
			tokens, err := p.client.ListNodeTokens(context.Background(), "rack1-gpu3")
			if err != nil || len(tokens) != 1 || tokens[0].RevokedAt == nil {
				return fmt.Errorf("tokens after destroy %+v, %v; want the one, revoked", tokens, err)
			}
			if d, err := p.client.GetNodeDeclaration(context.Background(), "rack1-gpu3"); !notFound(err) {
				return fmt.Errorf("declaration after destroy %+v, %v; want none", d, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: nodeConfig(p, ws, 32),
				Check: func(s *terraform.State) error {
					tokenID = attr(s, "token_id")
					cmd := attr(s, "agent_command")
					if !strings.Contains(cmd, "-node-id=rack1-gpu3") || !strings.Contains(cmd, "max-num-seqs=32") || strings.Contains(cmd, attr(s, "token")) {
						return fmt.Errorf("agent command %q", cmd)
					}
					a, err := nodeagent.New(nodeagent.Config{ServerURL: ws, NodeID: "rack1-gpu3", Token: nodeproto.Secret(attr(s, "token")),
						EngineURL: p.engine, Models: []nodeproto.Model{{Name: testModel, ServedName: testModel, MaxNumSeqs: 32,
							MaxModelLen: 8192, KVCapacityTokens: 200000}}})
					if err != nil {
						return err
					}
					ctx, cancel := context.WithCancel(context.Background())
					stop = cancel
					agentRun.Go(func() { _ = a.Run(ctx) })
					if err := waitFor("the agent to register with its Terraform token", registered); err != nil {
						return err
					}
					return waitFor("/admin/nodes to show the declared labels and gpu_count", func() bool {
						return listedWithSite(p, "basement")
					})
				},
			},
			{
				Config: nodeConfigAt(p, ws, 48, "attic"),
				Check: func(s *terraform.State) error {
					if attr(s, "token_id") != tokenID || !strings.Contains(attr(s, "agent_command"), "max-num-seqs=48") {
						return fmt.Errorf("token %s (was %s), command %q", attr(s, "token_id"), tokenID, attr(s, "agent_command"))
					}
					if !registered() {
						return fmt.Errorf("an in-place change disconnected the agent")
					}
					if !listedWithSite(p, "attic") {
						return fmt.Errorf("/admin/nodes does not show the updated label")
					}
					return nil
				},
			},
			{
				ResourceName:            "llmplat_onprem_node.n",
				ImportState:             true,
				ImportStateId:           "rack1-gpu3",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"token"},
			},
			{
				// An import block: the plan after the import must be empty.
				ResourceName:    "llmplat_onprem_node.n",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithID,
				ImportStateId:   "rack1-gpu3",
			},
			{
				// terraform plan -generate-config-out: the written HCL must
				// be valid and plan no change.
				ResourceName:    "llmplat_onprem_node.n",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithID,
				ImportStateId:   "rack1-gpu3",
				GenerateConfig:  true,
			},
		},
	})
}

// listedWithSite reports whether /admin/nodes lists rack1-gpu3 with its
// site label and its declared gpu_count (2) beside the GPUs its agent
// registered.
func listedWithSite(p *platform, site string) bool {
	list, err := p.client.ListNodes(context.Background())
	if err != nil {
		return false
	}
	for _, n := range list.Data {
		if n.ID == "rack1-gpu3" {
			d := n.Declared
			return d != nil && d.Labels["site"] == site && d.GPUCount != nil && *d.GPUCount == 2
		}
	}
	return false
}

// TestAccOnpremNodeInvalid: a bad node id and a zero limit fail at plan,
// the limit with the admin API's message.
func TestAccOnpremNodeInvalid(t *testing.T) {
	p := startPlatform(t)
	for _, tc := range []struct{ from, to, want string }{
		{`node_id          = "rack1-gpu3"`, `node_id          = "rack 1"`, `(?s)Invalid node id.*node_id`},
		{`max_num_seqs    = 32`, `max_num_seqs    = 0`, `(?s)Value the platform refuses.*max_num_seqs must be 1 to 2147483647`},
	} {
		cfg := strings.Replace(nodeConfig(p, "ws://127.0.0.1:1/v1/nodes/connect", 32), tc.from, tc.to, 1)
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: factories(),
			Steps:                    []resource.TestStep{{Config: cfg, PlanOnly: true, ExpectError: regexp.MustCompile(tc.want)}},
		})
	}
}
