package eksllm_test

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// TestIdleCostCountsTheModuleDefaults: the idle bill `llmplat plan -f`
// prints (capacity.DefaultEKSBase) counts what this module runs at its
// defaults, which examples/eks keeps: the system nodes and their type, the
// NAT gateways, Aurora's instances at their minimum ACUs, the Redis nodes
// and their type, and the load balancers. A default changed here without
// the bill, or the bill without the module, fails.
func TestIdleCostCountsTheModuleDefaults(t *testing.T) {
	aws := load(t, ".")
	def := func(name string) cty.Value {
		return literal(t, attr(t, aws.block(t, "variable", name), "default"))
	}
	num := func(v cty.Value) float64 { f, _ := v.AsBigFloat().Float64(); return f }
	optional := func(variable, field string) cty.Value {
		typ := attr(t, aws.block(t, "variable", variable), "type").(*hclsyntax.FunctionCallExpr)
		for _, item := range typ.Args[0].(*hclsyntax.ObjectConsExpr).Items {
			if literal(t, item.KeyExpr).AsString() != field {
				continue
			}
			opt, ok := item.ValueExpr.(*hclsyntax.FunctionCallExpr)
			if !ok || opt.Name != "optional" || len(opt.Args) != 2 {
				t.Fatalf("%s.%s has no default", variable, field)
			}
			return literal(t, opt.Args[1])
		}
		t.Fatalf("%s has no field %s", variable, field)
		return cty.NilVal
	}
	nat := 3 // one per zone of the region's first three
	if def("single_nat_gateway").True() {
		nat = 1
	}
	lbs := 0
	for _, bl := range aws.blocks("resource") {
		if bl.Labels[0] == "aws_lb" {
			if _, counted := bl.Body.Attributes["count"]; counted {
				t.Fatalf("aws_lb.%s has a count: the idle bill counts one", bl.Labels[1])
			}
			lbs++
		}
	}
	got := capacity.EKSBase{
		SystemNodes:     int(num(def("system_nodes").GetAttr("desired"))),
		SystemInstance:  def("system_instance_types").Index(cty.NumberIntVal(0)).AsString(),
		NATGateways:     nat,
		AuroraInstances: int(num(optional("database", "instances"))),
		AuroraMinACU:    num(optional("database", "min_acu")),
		CacheNodes:      int(num(optional("redis", "nodes"))),
		CacheNodeType:   optional("redis", "node_type").AsString(),
		LoadBalancers:   lbs,
	}
	if want := capacity.DefaultEKSBase(); got != want {
		t.Errorf("modules/eks-llm at its defaults runs %+v; the idle bill counts %+v", got, want)
	}

	example := load(t, filepath.Join("..", "..", "examples", "eks"))
	eks := example.block(t, "module", "eks")
	for _, name := range []string{"system_nodes", "system_instance_types", "single_nat_gateway", "availability_zones", "database", "redis"} {
		if _, ok := eks.Body.Attributes[name]; ok {
			t.Errorf("examples/eks sets %s: the idle bill the guide shows counts the module's default", name)
		}
	}
}
