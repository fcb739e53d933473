package ledger

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// ruleDraws is how many random inputs each rule's SQL is compared on.
const ruleDraws = 2000

// sqlRule evaluates rendered rules on PostgreSQL, for the differential
// tests of rules.go's renderings against their Go functions.
type sqlRule struct {
	t  *testing.T
	db *store.DB
}

// newSQLRule returns an evaluator on a private PostgreSQL database.
func newSQLRule(t *testing.T) sqlRule {
	t.Helper()
	return sqlRule{t: t, db: newFixture(t, testenv.Postgres(t)).db}
}

// eval returns the values of exprs over one row whose bigint columns
// named by cols hold args; an expression may name a column an earlier one
// defined with "AS name" (they are evaluated in nested selects, in order).
func (s sqlRule) eval(cols []string, args []int64, exprs ...string) []any {
	s.t.Helper()
	casts := make([]string, len(cols))
	params := make([]any, len(args))
	for i := range cols {
		casts[i], params[i] = fmt.Sprintf("$%d::bigint", i+1), args[i]
	}
	from := fmt.Sprintf("(VALUES (%s)) AS x0(%s)", strings.Join(casts, ", "), strings.Join(cols, ", "))
	for i, e := range exprs[:len(exprs)-1] {
		from = fmt.Sprintf("(SELECT x%d.*, %s FROM %s) AS x%d", i, e, from, i+1)
	}
	last := exprs[len(exprs)-1]
	got := make([]any, strings.Count(last, "@@")+1)
	ptrs := make([]any, len(got))
	for i := range got {
		ptrs[i] = &got[i]
	}
	query := "SELECT " + strings.ReplaceAll(last, "@@", ", ") + " FROM " + from
	if err := s.db.QueryRowContext(context.Background(), query, params...).Scan(ptrs...); err != nil {
		s.t.Fatalf("%s %v: %v", query, args, err)
	}
	return got
}

// logUniform draws a non-negative value below 2^maxBits spread across
// magnitudes, so large values are as common as small ones.
func logUniform(rng *rand.Rand, maxBits int) int64 {
	return rng.Int64N(int64(1) << (1 + rng.IntN(maxBits)))
}

// TestCostSQLMatchesCost prices random requests, large and negative ones
// included, with costSQL and with Cost: they agree to the micro-credit.
// PostgreSQL's numeric division keeps about 16 significant digits, so a
// ceiling taken after "/" differed for estimates of more than 16 digits.
func TestCostSQLMatchesCost(t *testing.T) {
	s := newSQLRule(t)
	rng := rand.New(rand.NewPCG(14, 15))
	draws := [][4]int64{ // prompt, completion, prompt price, completion price
		{1, 1, 1, 1},
		{0, 0, 0, 0},
		{1_000_000_000_001, 0, 1_000_000_000_000, 0},   // 1e24 + 1e12: more than 16 digits
		{3_000_000_000, 7, 3_333_333_333_333, 999_999}, // a remainder far below the rounding
		{1 << 40, 1 << 40, 1 << 62, 1 << 62},           // past MaxInt64: capped
		{2_147_483_647, 2_147_483_647, 4_294_967_297, 123},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{-5, 10, 1_000_000, -3}, // negatives count as zero
	}
	for range ruleDraws {
		d := [4]int64{logUniform(rng, 40), logUniform(rng, 40), logUniform(rng, 62), logUniform(rng, 62)}
		switch rng.IntN(5) {
		case 0:
			d[rng.IntN(4)] = -logUniform(rng, 62)
		case 1: // a sum just off a multiple of tokensPerPrice, where rounding decides
			k, off := logUniform(rng, 40), rng.Int64N(5)-2
			d = [4]int64{max(k*tokensPerPrice+off, 0), rng.Int64N(2), 1, 0}
		}
		draws = append(draws, d)
	}
	expr := costSQL("p", "c", "pp", "cp")
	for _, d := range draws {
		got := s.eval([]string{"p", "c", "pp", "cp"}, d[:], expr)[0]
		if want := Cost(d[0], d[1], d[2], d[3]); got != want {
			t.Errorf("Cost%v: SQL %v, Go %d", d, got, want)
		}
	}
}

// TestClampSQLMatchesClampOutput draws models and requests and compares
// the SQL the reservation batch clamps with (fitsContextSQL, clampSQL)
// with clampOutput: the same refusals, the same cap.
func TestClampSQLMatchesClampOutput(t *testing.T) {
	s := newSQLRule(t)
	rng := rand.New(rand.NewPCG(16, 17))
	cols := []string{"prompt", "max_tokens", "max_context", "max_output"}
	exprs := fitsContextSQL("prompt", "max_context") + "@@" +
		"CASE WHEN " + fitsContextSQL("prompt", "max_context") + " THEN " + clampSQL("prompt", "max_tokens", "max_context", "max_output") + " END"
	for range ruleDraws {
		maxContext := 1 + rng.Int64N(1<<31-1) // the models' INTEGER columns
		m := modelTerms{maxContext: maxContext, maxOutput: 1 + rng.Int64N(maxContext)}
		r := Reservation{PromptTokens: rng.Int64N(maxContext + 10)}
		if rng.IntN(3) == 0 { // at the edge of the context
			r.PromptTokens = max(maxContext+rng.Int64N(5)-2, 0)
		}
		switch rng.IntN(4) {
		case 0: // unset
		case 1:
			r.MaxOutputTokens = 1 + rng.Int64N(2*maxContext)
		case 2: // at the edge of the model's cap or the room left
			edge := []int64{m.maxOutput, maxContext - r.PromptTokens}[rng.IntN(2)]
			r.MaxOutputTokens = max(edge+rng.Int64N(3)-1, 0)
		default:
			r.MaxOutputTokens = logUniform(rng, 62)
		}
		if rng.IntN(10) == 0 {
			r.PromptTokens = logUniform(rng, 62)
		}
		got := s.eval(cols, []int64{r.PromptTokens, r.MaxOutputTokens, m.maxContext, m.maxOutput}, exprs)
		want, err := clampOutput(r, m)
		if fits := got[0].(bool); fits != (err == nil) || (fits && got[1] != want) {
			t.Errorf("prompt %d, max_tokens %d, model %+v: SQL fits %v cap %v; Go %d, %v",
				r.PromptTokens, r.MaxOutputTokens, m, got[0], got[1], want, err)
		}
	}
}

// TestBoundSQLMatchesBoundUsage draws reports, hostile ones included, and
// reservations, and compares the settle batch's bound (boundCompletionSQL,
// boundPromptSQL, negativeSQL, overReservedSQL) with BoundUsage with
// nothing relayed and no prompt floor, as a batch's rows hold neither:
// the same counts, the same corrections.
func TestBoundSQLMatchesBoundUsage(t *testing.T) {
	s := newSQLRule(t)
	rng := rand.New(rand.NewPCG(18, 19))
	cols := []string{"rpt", "rct", "est", "mo"}
	exprs := []string{
		boundCompletionSQL("rct", "mo") + " AS ct",
		boundPromptSQL("rpt", "est", "mo", "ct") + "@@ct@@" + negativeSQL("rpt", "rct") + "@@" +
			overReservedSQL("rpt", "rct", boundPromptSQL("rpt", "est", "mo", "ct"), "ct"),
	}
	draw := func() int64 {
		switch rng.IntN(6) {
		case 0:
			return -logUniform(rng, 62)
		case 1:
			return math.MaxInt64 - rng.Int64N(3)
		default:
			return logUniform(rng, 20)
		}
	}
	for range ruleDraws {
		reported := Usage{PromptTokens: draw(), CompletionTokens: draw()}
		b := Bounds{PromptEstimate: max(draw(), 0), MaxOutput: max(draw(), 0)} // the columns are never negative
		if rng.IntN(8) == 0 {
			b.MaxOutput = 0 // a row reserved before the cap was stored
		}
		got := s.eval(cols, []int64{reported.PromptTokens, reported.CompletionTokens, b.PromptEstimate, b.MaxOutput}, exprs...)
		want, c := BoundUsage(reported, Relayed{}, b)
		if got[0] != want.PromptTokens || got[1] != want.CompletionTokens ||
			got[2] != (c&Negative != 0) || got[3] != (c&OverReserved != 0) || c&^(Negative|OverReserved) != 0 {
			t.Errorf("BoundUsage(%+v, 0, %+v): SQL prompt %v completion %v negative %v over %v; Go %+v %s",
				reported, b, got[0], got[1], got[2], got[3], want, c)
		}
	}
}

// TestPartialSQLMatchesPartialUsage compares the settle batch's partial
// rule (partialSourceSQL, partialNothingSQL, partialPromptSQL) with
// Source.partial and partialUsage, for every source and random counts.
func TestPartialSQLMatchesPartialUsage(t *testing.T) {
	s := newSQLRule(t)
	// "estimate" is still a value of the settle_source enum, though no Go code settles with it.
	rng := rand.New(rand.NewPCG(20, 21))
	for _, src := range []Source{SourceExact, SourcePartial, SourceNodeLog, Source("estimate")} {
		var isPartial bool
		q := "SELECT " + partialSourceSQL("$1::settle_source")
		if err := s.db.QueryRowContext(context.Background(), q, string(src)).Scan(&isPartial); err != nil {
			t.Fatal(err)
		}
		if isPartial != src.partial() {
			t.Errorf("source %s: SQL partial %t, Go %t", src, isPartial, src.partial())
		}
	}
	cols := []string{"pt", "ct", "est"}
	exprs := partialNothingSQL("pt", "ct") + "@@" + partialPromptSQL("pt", "est")
	for range ruleDraws {
		u := Usage{PromptTokens: rng.Int64N(2) * logUniform(rng, 30), CompletionTokens: rng.Int64N(2) * logUniform(rng, 30)}
		est := logUniform(rng, 30)
		got := s.eval(cols, []int64{u.PromptTokens, u.CompletionTokens, est}, exprs)
		want, produced := partialUsage(u, est)
		if got[0] != !produced || (produced && got[1] != want.PromptTokens) {
			t.Errorf("partialUsage(%+v, %d): SQL nothing %v prompt %v; Go %+v produced %t", u, est, got[0], got[1], want, produced)
		}
	}
}

// TestChargeSQLMatchesCharge compares the settle batch's charge
// (chargeSQL, chargeCappedSQL) with charge.
func TestChargeSQLMatchesCharge(t *testing.T) {
	s := newSQLRule(t)
	rng := rand.New(rand.NewPCG(22, 23))
	exprs := chargeSQL("full_cost", "reserved") + "@@" + chargeCappedSQL("full_cost", "reserved")
	for range ruleDraws {
		full, reserved := logUniform(rng, 62), logUniform(rng, 62)
		if rng.IntN(4) == 0 {
			reserved = full
		}
		got := s.eval([]string{"full_cost", "reserved"}, []int64{full, reserved}, exprs)
		cost, capped := charge(full, reserved)
		if got[0] != cost || got[1] != capped {
			t.Errorf("charge(%d, %d): SQL %v %v; Go %d %t", full, reserved, got[0], got[1], cost, capped)
		}
	}
}
