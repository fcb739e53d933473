package capacity

import (
	"math"
	"strconv"
	"strings"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// RatioSignificantDigits is how docs/requirements.md rounds a derived ratio when it
// states it: two significant figures (140 ÷ 32 = 4.375 is "4.4",
// 2.5 ÷ 5.4 = 0.463 is "0.46", 10 ÷ 1.08 = 9.26 is "9.3", 400 ÷ 46.9 = 8.53
// is "8.5", 3.75 is "3.8", 112.5 requests is "about 110"). Whole things —
// streams, replicas, GPUs, requests in a queue — are counted instead, and
// memory is stated to 0.1 GiB (22.64 GiB is "22.6").
const RatioSignificantDigits = 2

// RoundSig rounds x to digits significant figures, halves away from zero.
func RoundSig(x float64, digits int) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) || digits < 1 {
		return x
	}
	return RoundTo(x, digits-1-int(math.Floor(math.Log10(math.Abs(x)))))
}

// RoundTo rounds x to decimals places (tens, hundreds… when negative),
// halves away from zero. It divides by a power of ten rather than multiply
// by a fraction, so RoundTo(0.463, 2) is exactly the literal 0.46.
func RoundTo(x float64, decimals int) float64 {
	if decimals >= 0 {
		p := math.Pow(10, float64(decimals))
		return math.Round(x*p) / p
	}
	p := math.Pow(10, float64(-decimals))
	return math.Round(x/p) * p
}

// approx formats x as docs/requirements.md states it: two significant figures.
func approx(x float64) string {
	return strconv.FormatFloat(RoundSig(x, RatioSignificantDigits), 'f', -1, 64)
}

// thousands formats n with commas between groups of three digits.
func thousands(n int64) string { return groupPrinter.Sprint(n) }

// groupPrinter prints integers the English way, 1,234,567: golang.org/x/text
// groups the digits (and is safe for concurrent use).
var groupPrinter = message.NewPrinter(language.English)

// bytesHuman formats a byte count in the largest binary unit that keeps it
// at least 1, to 0.1, without a trailing ".0" (256 MiB, 22.6 GiB, 1 GiB).
func bytesHuman(b float64) string {
	units := []struct {
		name string
		size float64
	}{{"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}}
	for _, u := range units {
		if b >= u.size {
			s := strconv.FormatFloat(RoundTo(b/u.size, 1), 'f', 1, 64)
			return strings.TrimSuffix(s, ".0") + " " + u.name
		}
	}
	return strconv.FormatFloat(b, 'f', 0, 64) + " B"
}
