package capacity

// Sources of the average cloud GPUs.
const (
	// AverageGiven marks an average given in the input.
	AverageGiven = "given"
	// AveragePeak marks the peak cloud GPUs taken when none was given.
	AveragePeak = "peak"
)

// planFleet adds up the GPUs at peak by kind, in the order the workloads
// name them, and fills each kind from the owned GPUs first: on-premises
// GPUs of a kind serve only replicas of that kind; the rest are cloud
// GPUs. Owned kinds no workload uses are listed last, idle. The reference workload: 22
// L40S at peak, 8 owned, 14 cloud.
func planFleet(ws []Workload, models []ModelPlan, f Fleet) FleetPlan {
	var kinds []GPUKindPlan
	index := map[string]int{}
	add := func(name string, price float64) int {
		i, ok := index[name]
		if !ok {
			i = len(kinds)
			index[name] = i
			kinds = append(kinds, GPUKindPlan{GPU: name, PricePerHourUSD: price})
		}
		return i
	}
	for i, w := range ws {
		k := add(w.Deployment.GPU.Name, priceOf(w.Deployment.GPU, f))
		kinds[k].GPUsAtPeak += models[i].Replicas.GPUs
	}
	for _, o := range f.OnPrem {
		i, used := index[o.GPU]
		if !used {
			g, _ := LookupGPU(o.GPU) // an idle kind: its price is shown, never charged
			i = add(o.GPU, priceOf(g, f))
		}
		kinds[i].OnPremAvailable += o.Count
	}
	var fp FleetPlan
	for i := range kinds {
		k := &kinds[i]
		k.OnPremUsed = min(k.OnPremAvailable, k.GPUsAtPeak)
		k.CloudGPUs = k.GPUsAtPeak - k.OnPremUsed
		k.CostPerHourUSD = float64(k.CloudGPUs) * k.PricePerHourUSD
		fp.GPUsAtPeak += k.GPUsAtPeak
		fp.OnPremGPUs += k.OnPremUsed
		fp.CloudGPUs += k.CloudGPUs
	}
	fp.ByGPU = kinds
	return fp
}

// planCost prices the cloud GPUs: at peak, each kind's cloud GPUs times its
// price (the reference workload: 14 × 2.5 = 35 USD an hour); over a month, the average
// cloud GPUs times the blended price times the hours (8 × 2.5 × 730 =
// 14,600 USD). The blended price is the peak cost per cloud GPU; with no
// cloud GPU at peak it is the mean price of all GPUs needed, weighted by
// count.
func planCost(fp FleetPlan, f Fleet) CostPlan {
	c := CostPlan{HoursPerMonth: f.HoursPerMonth, MonthlyBudgetUSD: f.MonthlyBudgetUSD}
	var needed, neededCost float64
	for _, k := range fp.ByGPU {
		c.CostPerHourPeakUSD += k.CostPerHourUSD
		needed += float64(k.GPUsAtPeak)
		neededCost += float64(k.GPUsAtPeak) * k.PricePerHourUSD
	}
	switch {
	case fp.CloudGPUs > 0:
		c.PricePerGPUHourUSD = c.CostPerHourPeakUSD / float64(fp.CloudGPUs)
	case needed > 0:
		c.PricePerGPUHourUSD = neededCost / needed
	}
	c.AverageCloudGPUs, c.AverageSource = f.AverageCloudGPUs, AverageGiven
	if f.AverageCloudGPUs == 0 {
		c.AverageCloudGPUs, c.AverageSource = float64(fp.CloudGPUs), AveragePeak
	}
	c.CostPerMonthUSD = c.AverageCloudGPUs * c.PricePerGPUHourUSD * f.HoursPerMonth
	c.WithinBudget = f.MonthlyBudgetUSD == 0 || c.CostPerMonthUSD <= f.MonthlyBudgetUSD
	return c
}
