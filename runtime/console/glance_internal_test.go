package console

import (
	"math"
	"testing"
)

// TestShortCredits: a headline shows two decimals, rounded, from one
// credit up, and every micro-credit below.
func TestShortCredits(t *testing.T) {
	for _, tc := range []struct {
		micro int64
		want  string
	}{
		{0, "0.000000"},
		{999_999, "0.999999"},
		{1_000_000, "1.00"},
		{1_994_999, "1.99"},
		{1_995_000, "2.00"},
		{1_999_999, "2.00"},
		{1_234_567_890_000, "1,234,567.89"},
		{-1_500_000, "-1.50"},
		{-999_999, "-0.999999"},
		{math.MinInt64, "-9,223,372,036,854.78"},
	} {
		if got := shortCredits(tc.micro); got != tc.want {
			t.Errorf("shortCredits(%d) = %q, want %q", tc.micro, got, tc.want)
		}
	}
}
