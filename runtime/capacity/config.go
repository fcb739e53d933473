package capacity

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// File is a plan's input as written by a person, in YAML or JSON, with the
// unit in every field name. GPUs and models add to the built-in profiles or
// override them field by field (a GPU named L40S with only a price keeps
// the L40S's memory); workloads name them.
type File struct {
	GPUs      []GPUSpec      `yaml:"gpus" json:"gpus"`
	Models    []ModelSpec    `yaml:"models" json:"models"`
	Workloads []WorkloadSpec `yaml:"workloads" json:"workloads"`
	Fleet     FleetSpec      `yaml:"fleet" json:"fleet"`
}

// GPUSpec is a GPU in a File.
type GPUSpec struct {
	Name                 string  `yaml:"name" json:"name"`
	MemoryGiB            float64 `yaml:"memory_gib" json:"memory_gib"`
	BandwidthGBPerSecond float64 `yaml:"bandwidth_gb_per_second" json:"bandwidth_gb_per_second"`
	TFLOPS               float64 `yaml:"tflops" json:"tflops"`
	// PriceUSDPerHour is a pointer because 0 is a real price (owned GPUs).
	PriceUSDPerHour *float64 `yaml:"price_usd_per_hour" json:"price_usd_per_hour"`
}

// ModelSpec is a model architecture in a File.
type ModelSpec struct {
	Name                string  `yaml:"name" json:"name"`
	ServedName          string  `yaml:"served_name" json:"served_name"`
	ParamsBillions      float64 `yaml:"params_billions" json:"params_billions"`
	Layers              int     `yaml:"layers" json:"layers"`
	KVHeads             int     `yaml:"kv_heads" json:"kv_heads"`
	HeadDim             int     `yaml:"head_dim" json:"head_dim"`
	WeightBytesPerParam float64 `yaml:"weight_bytes_per_param" json:"weight_bytes_per_param"`
	KVBytesPerElement   float64 `yaml:"kv_bytes_per_element" json:"kv_bytes_per_element"`
	// Weights is the checkpoint (a Hugging Face repository) and
	// Quantization its weight format (bf16, fp16, fp8), which must agree
	// with weight_bytes_per_param.
	Weights      string `yaml:"weights" json:"weights"`
	Quantization string `yaml:"quantization" json:"quantization"`
}

// WorkloadSpec is a Workload in a File; zero fields take the defaults.
type WorkloadSpec struct {
	Model                    string  `yaml:"model" json:"model"`
	GPU                      string  `yaml:"gpu" json:"gpu"`
	TensorParallelSize       int     `yaml:"tensor_parallel_size" json:"tensor_parallel_size"`
	GPUMemoryUtilization     float64 `yaml:"gpu_memory_utilization" json:"gpu_memory_utilization"`
	ActivationGiBPerGPU      float64 `yaml:"activation_gib_per_gpu" json:"activation_gib_per_gpu"`
	BlockSize                int     `yaml:"block_size" json:"block_size"`
	PeakStreams              int     `yaml:"peak_streams" json:"peak_streams"`
	PlannedStreamsPerReplica int     `yaml:"planned_streams_per_replica" json:"planned_streams_per_replica"`
	ContextTokens            int64   `yaml:"context_tokens" json:"context_tokens"`
	MaxModelLen              int64   `yaml:"max_model_len" json:"max_model_len"`
	AnswerTokens             int64   `yaml:"answer_tokens" json:"answer_tokens"`
	MinReplicas              int     `yaml:"min_replicas" json:"min_replicas"`
	MaxReplicas              int     `yaml:"max_replicas" json:"max_replicas"`
	SpareReplicas            int     `yaml:"spare_replicas" json:"spare_replicas"`
	ReplicaTokensPerSecond   float64 `yaml:"replica_output_tokens_per_second" json:"replica_output_tokens_per_second"`
	Utilisation              float64 `yaml:"utilisation" json:"utilisation"`
	MaxNumSeqsFactor         float64 `yaml:"max_num_seqs_factor" json:"max_num_seqs_factor"`
	// Spot allows spot capacity; a platform description declares it per
	// model (models[].spot) instead.
	Spot bool `yaml:"spot" json:"spot"`
}

// FleetSpec is the Fleet in a File.
type FleetSpec struct {
	OnPrem                  []OnPremSpec `yaml:"on_prem" json:"on_prem"`
	CloudPriceUSDPerGPUHour float64      `yaml:"cloud_price_usd_per_gpu_hour" json:"cloud_price_usd_per_gpu_hour"`
	AverageCloudGPUs        float64      `yaml:"average_cloud_gpus" json:"average_cloud_gpus"`
	HoursPerMonth           float64      `yaml:"hours_per_month" json:"hours_per_month"`
	QueueLimitSeconds       float64      `yaml:"queue_limit_seconds" json:"queue_limit_seconds"`
	MonthlyBudgetUSD        float64      `yaml:"monthly_budget_usd" json:"monthly_budget_usd"`
}

// OnPremSpec is a count of owned GPUs of one kind in a File.
type OnPremSpec struct {
	GPU   string `yaml:"gpu" json:"gpu"`
	Count int    `yaml:"count" json:"count"`
}

// ErrConfig marks a config file that cannot be read or understood.
var ErrConfig = errors.New("bad capacity config")

// LoadConfig reads a YAML or JSON plan file and turns it into an Input.
func LoadConfig(path string) (Input, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Input{}, fmt.Errorf("read capacity config: %w", err)
	}
	in, err := ParseConfig(data)
	if err != nil {
		return Input{}, fmt.Errorf("%s: %w", path, err)
	}
	return in, nil
}

// ParseConfig decodes a plan file (YAML, or JSON, which YAML reads too),
// rejecting unknown fields so a misspelt one is not silently ignored.
func ParseConfig(data []byte) (Input, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return Input{}, fmt.Errorf("%w: empty file", ErrConfig)
		}
		return Input{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return f.Input()
}

// Input resolves the file's names against its own and the built-in
// profiles and returns the planner's Input; Plan validates the numbers.
func (f File) Input() (Input, error) {
	gpus, err := f.gpus()
	if err != nil {
		return Input{}, err
	}
	models, err := f.models()
	if err != nil {
		return Input{}, err
	}
	in := Input{Fleet: f.Fleet.fleet()}
	for _, o := range f.Fleet.OnPrem {
		if _, ok := gpus[o.GPU]; !ok {
			return Input{}, fmt.Errorf("%w: fleet: on_prem gpu %q is neither built in nor listed under gpus", ErrConfig, o.GPU)
		}
	}
	for i, ws := range f.Workloads {
		m, ok := models[ws.Model]
		if !ok {
			return Input{}, fmt.Errorf("%w: workload %d: unknown model %q", ErrConfig, i+1, ws.Model)
		}
		g, ok := gpus[ws.GPU]
		if !ok {
			return Input{}, fmt.Errorf("%w: workload %d (%s): unknown gpu %q", ErrConfig, i+1, ws.Model, ws.GPU)
		}
		in.Workloads = append(in.Workloads, ws.workload(m, g))
	}
	return in, nil
}

// gpus is the built-in GPUs overlaid with the file's.
func (f File) gpus() (map[string]GPU, error) {
	out := map[string]GPU{}
	for _, g := range BuiltinGPUs() {
		out[g.Name] = g
	}
	for i, s := range f.GPUs {
		if s.Name == "" {
			return nil, fmt.Errorf("%w: gpu %d: name is required", ErrConfig, i+1)
		}
		g, builtin := out[s.Name]
		if !builtin && s.PriceUSDPerHour == nil {
			return nil, fmt.Errorf("%w: gpu %s: price_usd_per_hour is required (0 for owned GPUs)", ErrConfig, s.Name)
		}
		g.Name = s.Name
		setIf(&g.MemoryBytes, s.MemoryGiB*GiB)
		setIf(&g.BandwidthBytesPerSec, s.BandwidthGBPerSecond*GB)
		setIf(&g.FLOPS, s.TFLOPS*1e12)
		if s.PriceUSDPerHour != nil {
			g.PricePerHour = *s.PriceUSDPerHour
		}
		if err := g.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		out[s.Name] = g
	}
	return out, nil
}

// models is the built-in models overlaid with the file's.
func (f File) models() (map[string]Model, error) {
	out := map[string]Model{}
	for _, m := range BuiltinModels() {
		out[m.Name] = m
	}
	for i, s := range f.Models {
		if s.Name == "" {
			return nil, fmt.Errorf("%w: model %d: name is required", ErrConfig, i+1)
		}
		m := out[s.Name]
		m.Name = s.Name
		if s.ServedName != "" {
			m.ServedName = s.ServedName
		}
		if m.ServedName == "" {
			m.ServedName = s.Name
		}
		setIf(&m.Params, s.ParamsBillions*1e9)
		setIf(&m.Layers, s.Layers)
		setIf(&m.KVHeads, s.KVHeads)
		setIf(&m.HeadDim, s.HeadDim)
		setIf(&m.WeightBytes, s.WeightBytesPerParam)
		setIf(&m.KVBytes, s.KVBytesPerElement)
		if s.Weights != "" {
			m.Weights = s.Weights
		}
		if s.Quantization != "" {
			m.Quantization = s.Quantization
		}
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		out[s.Name] = m
	}
	return out, nil
}

// setIf overwrites *dst with v when v is not zero.
func setIf[T int | float64](dst *T, v T) {
	if v != 0 {
		*dst = v
	}
}

// workload is the spec with its model and GPU resolved.
func (s WorkloadSpec) workload(m Model, g GPU) Workload {
	return Workload{
		Deployment: Deployment{Model: m, GPU: g, TP: s.TensorParallelSize,
			GPUMemoryUtilization: s.GPUMemoryUtilization, ActivationBytes: s.ActivationGiBPerGPU * GiB,
			BlockSize: s.BlockSize},
		PeakStreams:              s.PeakStreams,
		PlannedStreamsPerReplica: s.PlannedStreamsPerReplica,
		ContextTokens:            s.ContextTokens,
		MaxModelLen:              s.MaxModelLen,
		AnswerTokens:             s.AnswerTokens,
		MinReplicas:              s.MinReplicas,
		MaxReplicas:              s.MaxReplicas,
		SpareReplicas:            s.SpareReplicas,
		ReplicaTokensPerSecond:   s.ReplicaTokensPerSecond,
		Utilisation:              s.Utilisation,
		MaxNumSeqsFactor:         s.MaxNumSeqsFactor,
		Spot:                     s.Spot,
	}
}

// fleet is the spec in the planner's units.
func (s FleetSpec) fleet() Fleet {
	f := Fleet{
		CloudPricePerGPUHour: s.CloudPriceUSDPerGPUHour,
		AverageCloudGPUs:     s.AverageCloudGPUs,
		HoursPerMonth:        s.HoursPerMonth,
		QueueLimit:           time.Duration(s.QueueLimitSeconds * float64(time.Second)),
		MonthlyBudgetUSD:     s.MonthlyBudgetUSD,
	}
	for _, o := range s.OnPrem {
		f.OnPrem = append(f.OnPrem, OnPremGPUs{GPU: o.GPU, Count: o.Count})
	}
	return f
}
