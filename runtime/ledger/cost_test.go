package ledger

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestCost(t *testing.T) {
	tests := []struct {
		name                         string
		prompt, completion           int64
		promptPrice, completionPrice int64
		want                         int64
	}{
		{name: "nothing", want: 0},
		{name: "free model", prompt: 1000, completion: 1000, want: 0},
		{name: "one token rounds up", prompt: 1, promptPrice: 1, want: 1},
		{name: "a million tokens at one", prompt: 1_000_000, promptPrice: 1, want: 1},
		{name: "one past a million", prompt: 1_000_001, promptPrice: 1, want: 2},
		{name: "parts add before rounding", prompt: 500_000, completion: 500_000, promptPrice: 1, completionPrice: 1, want: 1},
		{name: "exact", prompt: 1000, completion: 500, promptPrice: 200_000, completionPrice: 600_000, want: 500},
		{name: "just over", prompt: 1001, completion: 500, promptPrice: 200_000, completionPrice: 600_000, want: 501},
		{name: "70b reference prices", prompt: 2048, completion: 512, promptPrice: 900_000, completionPrice: 2_700_000, want: 3226},
		{name: "beyond int64 before dividing", prompt: 1_000_000_000_000, promptPrice: 1_000_000_000, want: 1_000_000_000_000_000},
		{name: "both parts huge", prompt: math.MaxInt64, completion: math.MaxInt64, promptPrice: 1, completionPrice: 1,
			want: 18_446_744_073_710},
		{name: "largest exact", prompt: math.MaxInt64, promptPrice: 1_000_000, want: math.MaxInt64},
		{name: "saturates", prompt: math.MaxInt64, completion: math.MaxInt64, promptPrice: math.MaxInt64, completionPrice: math.MaxInt64,
			want: math.MaxInt64},
		{name: "saturates just past", prompt: math.MaxInt64, promptPrice: 1_000_001, want: math.MaxInt64},
		{name: "negatives count as zero", prompt: -5, completion: 10, promptPrice: 1_000_000, completionPrice: -3, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Cost(tt.prompt, tt.completion, tt.promptPrice, tt.completionPrice); got != tt.want {
				t.Errorf("Cost(%d, %d, %d, %d) = %d, want %d", tt.prompt, tt.completion, tt.promptPrice, tt.completionPrice, got, tt.want)
			}
		})
	}
}

func TestCostMatchesBigArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Magnitudes from tiny to the full int64 range, so both the common and
	// the overflowing paths are compared.
	draw := func() int64 { return rng.Int64N(math.MaxInt64) >> rng.IntN(63) }
	for range 20_000 {
		p, c, pp, cp := draw(), draw(), draw(), draw()
		sum := new(big.Int).Mul(big.NewInt(p), big.NewInt(pp))
		sum.Add(sum, new(big.Int).Mul(big.NewInt(c), big.NewInt(cp)))
		sum.Add(sum, big.NewInt(tokensPerPrice-1))
		want := sum.Div(sum, big.NewInt(tokensPerPrice))
		if !want.IsInt64() {
			want.SetInt64(math.MaxInt64)
		}
		if got := Cost(p, c, pp, cp); got != want.Int64() {
			t.Fatalf("Cost(%d, %d, %d, %d) = %d, want %s", p, c, pp, cp, got, want)
		}
	}
}
