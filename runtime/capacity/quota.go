package capacity

import (
	"fmt"
	"slices"
)

// QuotaPlan is the EC2 vCPU quota the models' nodes need: each replica on
// its own smallest instance (Karpenter buys nodes as pods arrive, one by
// one when a model scales up), up to the replicas KEDA may run
// (max_replicas, the plan's peak replicas when there is no cap). A model
// allowed on spot may land wholly on either capacity type, so it counts
// in both the on-demand and the spot quota.
type QuotaPlan struct {
	Models []ModelQuota `json:"models"`
	// Quotas are the EC2 service quotas to request, in vCPUs.
	Quotas []QuotaNeed `json:"quotas"`
}

// ModelQuota is one model's nodes at its cap.
type ModelQuota struct {
	Model string `json:"model"`
	// Instance is the smallest instance that holds a replica; empty when
	// the GPU has none in the table (not counted).
	Instance         string `json:"instance"`
	GPUsPerInstance  int    `json:"gpus_per_instance"`
	VCPUsPerInstance int    `json:"vcpus_per_instance"`
	// Replicas is max_replicas, or the peak replicas without a cap.
	Replicas int  `json:"replicas"`
	Spot     bool `json:"spot"`
	// VCPUs is Replicas × VCPUsPerInstance.
	VCPUs int `json:"vcpus"`
	// NodeGPUs is Replicas × GPUsPerInstance: what the nodes bring to a
	// Karpenter NodePool's nvidia.com/gpu limit.
	NodeGPUs int `json:"node_gpus"`
}

// QuotaNeed is one EC2 service quota and the vCPUs it must allow.
type QuotaNeed struct {
	Name  string `json:"name"`
	VCPUs int    `json:"vcpus"`
}

// planQuota sizes the quota of the planned workloads. The reference workload: 8 × 4
// (g6e.xlarge) + 5 × 48 + 3 × 48 (g6e.12xlarge) = 416 on-demand vCPUs,
// and 32 spot for the 8B.
func planQuota(ws []Workload, models []ModelPlan) QuotaPlan {
	q := QuotaPlan{Models: []ModelQuota{}, Quotas: []QuotaNeed{}}
	add := func(name string, vcpus int) {
		i := slices.IndexFunc(q.Quotas, func(n QuotaNeed) bool { return n.Name == name })
		if i < 0 {
			q.Quotas = append(q.Quotas, QuotaNeed{Name: name})
			i = len(q.Quotas) - 1
		}
		q.Quotas[i].VCPUs += vcpus
	}
	for i, w := range ws {
		mq := ModelQuota{Model: w.Deployment.Model.Name, Replicas: w.MaxReplicas, Spot: w.Spot}
		if mq.Replicas == 0 {
			mq.Replicas = models[i].Replicas.Replicas
		}
		in, err := SmallestInstance(w.Deployment.GPU.Name, w.Deployment.TP)
		if err == nil {
			mq.Instance, mq.GPUsPerInstance, mq.VCPUsPerInstance = in.Type, in.GPUs, in.VCPUs
			mq.VCPUs, mq.NodeGPUs = mq.Replicas*in.VCPUs, mq.Replicas*in.GPUs
			add(OnDemandQuotaName(in.QuotaClass), mq.VCPUs)
			if w.Spot {
				add(SpotQuotaName(in.QuotaClass), mq.VCPUs)
			}
		}
		q.Models = append(q.Models, mq)
	}
	return q
}

// writeQuota is the nodes at the models' caps and the vCPU quotas to ask
// AWS for.
func writeQuota(w *errWriter, q QuotaPlan) {
	w.printf("\nEC2 vCPU quota (each replica on its smallest instance, at max replicas)\n")
	rows := [][]string{{"model", "instance", "GPUs", "vCPUs", "replicas", "capacity", "vCPUs needed"}}
	for _, m := range q.Models {
		capType := "on-demand"
		if m.Spot {
			capType = "on-demand or spot"
		}
		if m.Instance == "" {
			rows = append(rows, []string{m.Model, "none known", "", "", fmt.Sprint(m.Replicas), capType, "not counted"})
			continue
		}
		rows = append(rows, []string{m.Model, m.Instance, fmt.Sprint(m.GPUsPerInstance), fmt.Sprint(m.VCPUsPerInstance),
			fmt.Sprint(m.Replicas), capType, fmt.Sprintf("%d (%d × %d)", m.VCPUs, m.Replicas, m.VCPUsPerInstance)})
	}
	table(w, rows)
	w.printf("\n")
	rows = [][]string{{"service quota", "vCPUs"}}
	for _, n := range q.Quotas {
		rows = append(rows, []string{n.Name, fmt.Sprint(n.VCPUs)})
	}
	table(w, rows)
}
