package capacity

import "fmt"

// EKSBase is what modules/eks-llm runs whatever the load, at its
// variables' defaults; TestIdleCostCountsTheModuleDefaults
// (modules/eks-llm) keeps the two equal.
type EKSBase struct {
	// SystemNodes and SystemInstance are the system node group
	// (system_nodes.desired of system_instance_types[0]).
	SystemNodes    int
	SystemInstance string
	// NATGateways is 1 with single_nat_gateway, else one per zone.
	NATGateways int
	// AuroraInstances each idle at AuroraMinACU (database.instances and
	// database.min_acu): Serverless v2 bills each instance's capacity.
	AuroraInstances int
	AuroraMinACU    float64
	// CacheNodes of CacheNodeType are the Redis replication group
	// (redis.nodes, redis.node_type).
	CacheNodes    int
	CacheNodeType string
	// LoadBalancers is the gateway's Network Load Balancer (edge.tf).
	LoadBalancers int
}

// DefaultEKSBase is modules/eks-llm at its defaults, as examples/eks
// deploys it.
func DefaultEKSBase() EKSBase {
	return EKSBase{
		SystemNodes: 3, SystemInstance: "m6i.xlarge",
		NATGateways:     1,
		AuroraInstances: 2, AuroraMinACU: 0.5,
		CacheNodes: 2, CacheNodeType: "cache.r7g.large",
		LoadBalancers: 1,
	}
}

// listPriceUSDPerHour are AWS's on-demand list prices in us-east-1, per
// hour, of what EKSBase names: the figures docs/deploy-eks.md has given
// (a control plane about 73 USD a month, three m6i.xlarge about 420, two
// cache.r7g.large about 330) and AWS's pricing pages for the rest. Prices
// move and differ by region: the plan prints each, so a reader can check
// it against their region's.
var listPriceUSDPerHour = map[string]float64{
	"eks-cluster":     0.10,   // EKS, a cluster in standard support
	"m6i.xlarge":      0.192,  // EC2 on demand
	"nat-gateway":     0.045,  // per gateway-hour; each GB processed is extra
	"aurora-acu":      0.12,   // Aurora Serverless v2 (Aurora Standard), per ACU-hour
	"cache.r7g.large": 0.226,  // ElastiCache on-demand node
	"nlb":             0.0225, // per load balancer-hour; NLCUs are extra
}

// IdlePlan is what the platform costs when no request comes: each model
// at its floor (min_replicas), each replica on its own smallest instance,
// and the parts the AWS layer runs whatever the load.
type IdlePlan struct {
	Parts         []IdlePart `json:"parts"`
	CostPerHour   float64    `json:"cost_per_hour_usd"`
	CostPerMonth  float64    `json:"cost_per_month_usd"`
	HoursPerMonth float64    `json:"hours_per_month"`
}

// IdlePart is one line of the idle bill.
type IdlePart struct {
	Part string `json:"part"`
	// Count of Unit, each at UnitPricePerHour.
	Count            float64 `json:"count"`
	Unit             string  `json:"unit"`
	UnitPricePerHour float64 `json:"unit_price_per_hour_usd"`
	CostPerHour      float64 `json:"cost_per_hour_usd"`
}

// PlanIdle prices in's floors and base at list prices. A floor's node is
// priced as its GPUs at the plan's price per GPU-hour (the instance's
// whole GPUs: a TP-2 replica alone buys a 4-GPU g6e.12xlarge). The
// reference deployment: 2 g6e.xlarge and 1 g6e.12xlarge (6 GPUs × 2.50 =
// 15 USD an hour) and 1.32 USD an hour of fixed parts, 11,910 USD a month.
// A model whose GPU no EC2 instance carries is left out (it runs on
// premises); a part without a list price is refused.
func PlanIdle(in Input, base EKSBase) (IdlePlan, error) {
	in = in.WithDefaults()
	p := IdlePlan{Parts: []IdlePart{}, HoursPerMonth: in.Fleet.HoursPerMonth}
	add := func(part string, count float64, unit string, price float64) {
		p.Parts = append(p.Parts, IdlePart{Part: part, Count: count, Unit: unit, UnitPricePerHour: price, CostPerHour: count * price})
		p.CostPerHour += count * price
	}
	for _, w := range in.Workloads {
		d := w.Deployment
		node, err := SmallestInstance(d.GPU.Name, d.TP)
		if err != nil {
			// A GPU no EC2 instance carries runs on premises only.
			continue
		}
		unit := fmt.Sprintf("%s (%d × %s)", node.Type, node.GPUs, d.GPU.Name)
		add(d.Model.Name+" floor", float64(w.MinReplicas), unit, float64(node.GPUs)*priceOf(d.GPU, in.Fleet))
	}
	price := func(name string) float64 { return listPriceUSDPerHour[name] }
	add("system nodes", float64(base.SystemNodes), base.SystemInstance, price(base.SystemInstance))
	add("NAT gateway", float64(base.NATGateways), "gateway", price("nat-gateway"))
	add("EKS control plane", 1, "cluster", price("eks-cluster"))
	add("Aurora Serverless v2", float64(base.AuroraInstances)*base.AuroraMinACU,
		fmt.Sprintf("ACU (%d instances at %g)", base.AuroraInstances, base.AuroraMinACU), price("aurora-acu"))
	add("ElastiCache", float64(base.CacheNodes), base.CacheNodeType, price(base.CacheNodeType))
	add("Network Load Balancer", float64(base.LoadBalancers), "load balancer", price("nlb"))
	for _, part := range p.Parts {
		if part.Count > 0 && part.UnitPricePerHour == 0 {
			return IdlePlan{}, fmt.Errorf("idle cost: no list price for %s (%s)", part.Part, part.Unit)
		}
	}
	p.CostPerMonth = p.CostPerHour * p.HoursPerMonth
	return p, nil
}

// writeIdle is the idle bill, one line a part.
func writeIdle(w *errWriter, p *IdlePlan) {
	if p == nil {
		return
	}
	w.printf("\nWhat it costs when idle (each model at its floor, each replica on its own smallest instance; list prices)\n")
	rows := [][]string{{"part", "count", "unit", "USD/hour each", "USD/hour", "USD/month"}}
	for _, part := range p.Parts {
		rows = append(rows, []string{part.Part, fmt.Sprintf("%g", part.Count), part.Unit,
			fmt.Sprintf("%.4g", part.UnitPricePerHour), fmt.Sprintf("%.4g", part.CostPerHour),
			thousands(int64(part.CostPerHour*p.HoursPerMonth + 0.5))})
	}
	rows = append(rows, []string{"total", "", "", "", fmt.Sprintf("%.2f", p.CostPerHour), thousands(int64(p.CostPerMonth + 0.5))})
	table(w, rows)
}
