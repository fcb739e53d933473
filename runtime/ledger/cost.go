package ledger

import (
	"math"
	"math/bits"
)

// tokensPerPrice is the number of tokens a price is quoted for: prices are
// micro-credits per million tokens.
const tokensPerPrice = 1_000_000

// Cost returns the micro-credits charged for promptTokens and
// completionTokens at prices in micro-credits per million tokens:
// ceil((promptTokens·promptPricePerM + completionTokens·completionPricePerM) / 1e6),
// rounded up so that a request is never free by rounding. The arithmetic is
// 128-bit, so no input overflows; a result beyond math.MaxInt64 saturates
// there. Negative arguments count as zero.
func Cost(promptTokens, completionTokens, promptPricePerM, completionPricePerM int64) int64 {
	hi1, lo1 := bits.Mul64(nonNegative(promptTokens), nonNegative(promptPricePerM))
	hi2, lo2 := bits.Mul64(nonNegative(completionTokens), nonNegative(completionPricePerM))
	// Each product is below 2^126, so their sum plus the rounding term fits
	// in 128 bits.
	lo, carry := bits.Add64(lo1, lo2, 0)
	hi, _ := bits.Add64(hi1, hi2, carry)
	lo, carry = bits.Add64(lo, tokensPerPrice-1, 0)
	hi += carry
	if hi >= tokensPerPrice {
		return math.MaxInt64 // the quotient needs more than 64 bits
	}
	q, _ := bits.Div64(hi, lo, tokensPerPrice)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// nonNegative returns v as a uint64, or 0 when v is negative.
func nonNegative(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}
