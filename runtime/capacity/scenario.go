package capacity

import "time"

// ReferenceInput is the reference workload: 200 streams at peak split 140/50/10
// over the 8B, 32B and 70B on L40S; 32, 16 and 8 planned streams per
// replica; 2,048-token contexts, 8,192 allowed, 400-token answers; the
// reference workload's 1,500 and 300 tokens/s for 8B and 70B replicas (the 32B's is
// derived, docs/requirements.md gives none); 8 owned L40S; 8 cloud GPUs on average,
// 730 hours a month, a 30 s queue and a 20,000 USD monthly target. Floors
// and caps are the reference workload's Deployments (8B 2..8, 32B 1..5, 70B 0..3); the
// 8B keeps one spare replica because it runs on spot capacity.
func ReferenceInput() Input {
	d := ReferenceDeployments()
	common := Workload{
		ContextTokens: DefaultContextTokens,
		MaxModelLen:   DefaultMaxModelLen,
		AnswerTokens:  DefaultAnswerTokens,
		Utilisation:   DefaultUtilisation,
	}
	w8, w32, w70 := common, common, common
	w8.Deployment, w8.PeakStreams, w8.PlannedStreamsPerReplica = d[0], 140, 32
	w8.MinReplicas, w8.MaxReplicas, w8.SpareReplicas = 2, 8, 1
	w8.Spot = true
	w8.ReplicaTokensPerSecond = 1500
	w32.Deployment, w32.PeakStreams, w32.PlannedStreamsPerReplica = d[1], 50, 16
	w32.MinReplicas, w32.MaxReplicas = 1, 5
	w70.Deployment, w70.PeakStreams, w70.PlannedStreamsPerReplica = d[2], 10, 8
	w70.MinReplicas, w70.MaxReplicas = 0, 3
	w70.ReplicaTokensPerSecond = 300
	return Input{
		Workloads: []Workload{w8, w32, w70},
		Fleet: Fleet{
			OnPrem:           []OnPremGPUs{{GPU: L40S.Name, Count: 8}},
			AverageCloudGPUs: 8,
			HoursPerMonth:    DefaultHoursPerMonth,
			QueueLimit:       30 * time.Second,
			MonthlyBudgetUSD: 20000,
		},
	}
}
