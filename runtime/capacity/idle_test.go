package capacity_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// TestIdleCost: with no load the reference deployment pays for its floors'
// nodes (the 8B's 2 g6e.xlarge, the 32B's g6e.12xlarge: a TP-2 replica
// alone buys 4 GPUs; the 70B at zero) at the plan's 2.50 USD per GPU-hour,
// and for the AWS layer at list prices: 15 + 1.3155 USD an hour, 11,910
// USD a month. More system nodes, a NAT gateway per zone or a higher
// floor cost that much more; the table shows every part.
func TestIdleCost(t *testing.T) {
	base := capacity.DefaultEKSBase()
	tests := []struct {
		name     string
		edit     func(*capacity.Input, *capacity.EKSBase)
		wantHour float64
	}{
		{"the reference deployment", func(*capacity.Input, *capacity.EKSBase) {}, 2*2.5 + 4*2.5 + 3*0.192 + 0.045 + 0.10 + 2*0.5*0.12 + 2*0.226 + 0.0225},
		{"a NAT gateway per zone", func(_ *capacity.Input, b *capacity.EKSBase) { b.NATGateways = 3 }, 16.3155 + 2*0.045},
		{"the 70B kept warm", func(in *capacity.Input, _ *capacity.EKSBase) { in.Workloads[2].MinReplicas = 1 }, 16.3155 + 4*2.5},
		{"a contract GPU price", func(in *capacity.Input, _ *capacity.EKSBase) { in.Fleet.CloudPricePerGPUHour = 2 }, 16.3155 - 6*0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, b := capacity.ReferenceInput(), base
			tt.edit(&in, &b)
			got, err := capacity.PlanIdle(in, b)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got.CostPerHour-tt.wantHour) > 1e-9 {
				t.Errorf("idle cost %.4f USD/hour, want %.4f", got.CostPerHour, tt.wantHour)
			}
			if math.Abs(got.CostPerMonth-tt.wantHour*730) > 1e-6 {
				t.Errorf("idle cost %.2f USD/month, want %.2f (730 hours)", got.CostPerMonth, tt.wantHour*730)
			}
		})
	}

	res, err := capacity.Plan(capacity.ReferenceInput())
	if err != nil {
		t.Fatal(err)
	}
	idle, err := capacity.PlanIdle(capacity.ReferenceInput(), base)
	if err != nil {
		t.Fatal(err)
	}
	res.Idle = &idle
	var out bytes.Buffer
	if err := capacity.WriteTable(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  llama-8b floor         2      g6e.xlarge (1 × L40S)     2.5            5         3,650\n",
		"  qwen-32b floor         1      g6e.12xlarge (4 × L40S)   10             10        7,300\n",
		"  total                                                                  16.32     11,910\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the idle table lacks %q:\n%s", want, out.String())
		}
	}
}
