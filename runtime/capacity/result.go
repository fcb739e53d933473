package capacity

// Result is a whole plan: one ModelPlan per workload, then the fleet and its
// cost. Its JSON names carry their units; it round-trips through JSON.
type Result struct {
	Models []ModelPlan `json:"models"`
	Fleet  FleetPlan   `json:"fleet"`
	Cost   CostPlan    `json:"cost"`
	Quota  QuotaPlan   `json:"quota"`
	// Idle is what the deployment costs with no load: planned for a
	// platform description (llmplat plan -f), nil otherwise.
	Idle *IdlePlan `json:"idle,omitempty"`
}

// ModelPlan is the plan of one model: memory, engine flags, replicas,
// throughput and cost per token, and its queue budget.
type ModelPlan struct {
	Model      string `json:"model"`
	ServedName string `json:"served_name"`
	// Weights and Quantization are the profile's checkpoint: what to upload.
	Weights      string         `json:"weights"`
	Quantization string         `json:"quantization"`
	GPU          string         `json:"gpu"`
	Memory       MemoryPlan     `json:"memory"`
	Flags        VLLMFlags      `json:"vllm_flags"`
	Replicas     ReplicaPlan    `json:"replicas"`
	Throughput   ThroughputPlan `json:"throughput"`
	Queue        QueueBudget    `json:"queue_budget"`
	// Warnings are findings that do not stop the plan, in words.
	Warnings []string `json:"warnings"`
}

// MemoryPlan is the KV-cache arithmetic of one replica.
type MemoryPlan struct {
	KVBytesPerToken       float64 `json:"kv_bytes_per_token"`
	ContextTokens         int64   `json:"context_tokens"`
	KVBytesAtContext      float64 `json:"kv_bytes_at_context"`
	MaxModelLenTokens     int64   `json:"max_model_len_tokens"`
	KVBytesAtMaxModelLen  float64 `json:"kv_bytes_at_max_model_len"`
	GPUMemoryBytes        float64 `json:"gpu_memory_bytes"`
	GPUMemoryUtilization  float64 `json:"gpu_memory_utilization"`
	TensorParallelSize    int     `json:"tensor_parallel_size"`
	WeightBytes           float64 `json:"weight_bytes"`
	ActivationBytesPerGPU float64 `json:"activation_bytes_per_gpu"`
	// UsableBytesPerReplica is GPU memory × utilisation × TP.
	UsableBytesPerReplica float64 `json:"usable_bytes_per_replica"`
	// KVCacheBytesPerReplica is usable − weights − activations × TP.
	KVCacheBytesPerReplica     float64 `json:"kv_cache_bytes_per_replica"`
	KVBlocksPerReplica         int64   `json:"kv_blocks_per_replica"`
	KVCapacityTokensPerReplica int64   `json:"kv_capacity_tokens_per_replica"`
	// StreamsAtContext and StreamsAtMaxModelLen are whole sequences that
	// fit at once, rounded down.
	StreamsAtContext     int64 `json:"streams_per_replica_at_context"`
	StreamsAtMaxModelLen int64 `json:"streams_per_replica_at_max_model_len"`
	// MinTensorParallelSize is the fewest GPUs (a power of two up to the
	// chosen TP) on which the planned streams and one max-model-len sequence
	// fit.
	MinTensorParallelSize int `json:"min_tensor_parallel_size"`
}

// VLLMFlags are the engine flags the plan sets.
type VLLMFlags struct {
	MaxModelLen          int64   `json:"max_model_len"`
	MaxNumSeqs           int64   `json:"max_num_seqs"`
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	TensorParallelSize   int     `json:"tensor_parallel_size"`
}

// ReplicaPlan is how many replicas and GPUs the model needs at peak.
type ReplicaPlan struct {
	PeakStreams              int `json:"peak_streams"`
	PlannedStreamsPerReplica int `json:"planned_streams_per_replica"`
	// ReplicasForLoad is peak ÷ planned, unrounded (the reference workload's 4.4).
	ReplicasForLoad float64 `json:"replicas_for_load"`
	// ReplicasForLoadRoundedUp is ReplicasForLoad rounded up.
	ReplicasForLoadRoundedUp int `json:"replicas_for_load_rounded_up"`
	SpareReplicas            int `json:"spare_replicas"`
	MinReplicas              int `json:"min_replicas"`
	MaxReplicas              int `json:"max_replicas"`
	// Replicas is max(rounded up + spare, floor).
	Replicas       int `json:"replicas_at_peak"`
	GPUsPerReplica int `json:"gpus_per_replica"`
	GPUs           int `json:"gpus_at_peak"`
}

// ThroughputPlan is the output rate of a replica and what a token costs.
type ThroughputPlan struct {
	ReplicaTokensPerSecond float64 `json:"replica_output_tokens_per_second"`
	// Source is "given" (measured or assumed in the input) or "derived"
	// (from the decoding-step model).
	Source string `json:"replica_output_tokens_per_second_source"`
	// DerivedReplicaTokensPerSecond is the decoding-step model's estimate,
	// shown beside a given figure to check it.
	DerivedReplicaTokensPerSecond  float64 `json:"derived_replica_output_tokens_per_second"`
	StreamTokensPerSecond          float64 `json:"stream_output_tokens_per_second"`
	ReplicaMillionTokensPerHour    float64 `json:"replica_million_output_tokens_per_hour"`
	PricePerGPUHourUSD             float64 `json:"price_usd_per_gpu_hour"`
	ReplicaCostPerHourUSD          float64 `json:"replica_cost_usd_per_hour"`
	CostPerMillionFullLoadUSD      float64 `json:"cost_usd_per_million_output_tokens_full_load"`
	Utilisation                    float64 `json:"utilisation"`
	CostPerMillionAtUtilisationUSD float64 `json:"cost_usd_per_million_output_tokens_at_utilisation"`
}

// QueueBudget is how much a replica drains from the model queue and how
// large a burst the queue limit holds.
type QueueBudget struct {
	AnswerTokens                int64   `json:"answer_tokens"`
	SecondsPerAnswer            float64 `json:"seconds_per_answer"`
	RequestsPerSecondPerReplica float64 `json:"requests_per_second_per_replica"`
	QueueLimitSeconds           float64 `json:"queue_limit_seconds"`
	BurstRequestsPerReplica     int64   `json:"queue_burst_requests_per_replica"`
	BurstRequestsAtPeak         int64   `json:"queue_burst_requests_at_peak"`
}

// FleetPlan is the GPUs at peak, on-premises first.
type FleetPlan struct {
	GPUsAtPeak int           `json:"gpus_at_peak"`
	OnPremGPUs int           `json:"onprem_gpus_used"`
	CloudGPUs  int           `json:"cloud_gpus_at_peak"`
	ByGPU      []GPUKindPlan `json:"by_gpu"`
}

// GPUKindPlan is the fleet of one GPU kind.
type GPUKindPlan struct {
	GPU             string  `json:"gpu"`
	GPUsAtPeak      int     `json:"gpus_at_peak"`
	OnPremAvailable int     `json:"onprem_gpus_available"`
	OnPremUsed      int     `json:"onprem_gpus_used"`
	CloudGPUs       int     `json:"cloud_gpus_at_peak"`
	PricePerHourUSD float64 `json:"price_usd_per_gpu_hour"`
	CostPerHourUSD  float64 `json:"cost_usd_per_hour_peak"`
}

// CostPlan is the cloud bill: only cloud GPUs cost money here.
type CostPlan struct {
	CostPerHourPeakUSD float64 `json:"cost_usd_per_hour_peak"`
	// PricePerGPUHourUSD is the blended price of a cloud GPU-hour used for
	// the month.
	PricePerGPUHourUSD float64 `json:"price_usd_per_gpu_hour"`
	AverageCloudGPUs   float64 `json:"average_cloud_gpus"`
	// AverageSource is "given", or "peak" when no average was given.
	AverageSource    string  `json:"average_cloud_gpus_source"`
	HoursPerMonth    float64 `json:"hours_per_month"`
	CostPerMonthUSD  float64 `json:"cost_usd_per_month_average"`
	MonthlyBudgetUSD float64 `json:"monthly_budget_usd"`
	WithinBudget     bool    `json:"within_budget"`
}
