package ledger

import (
	"fmt"
	"math"
	"strings"
)

// The money rules. Each is one Go function — Cost (cost.go), clampOutput,
// BoundUsage (bound.go), partialUsage and charge — and the PostgreSQL
// batches (batch.go) run it as an SQL expression rendered by the function
// beside it from the same constants, never written out again in a
// statement. rules_sql_test.go evaluates every rendering against its Go
// function over random inputs, so the two cannot drift apart. The local
// mode's SQLite runs the Go functions only (reserveTx, finish).

// maxBigint is the largest PostgreSQL bigint, where a sum saturates as
// the Go rules saturate at math.MaxInt64.
const maxBigint = math.MaxInt64

// costSQL is Cost as a PostgreSQL expression of four bigint expressions:
// the products are taken in numeric, which cannot overflow, and the
// ceiling is an integer division of the sum plus tokensPerPrice−1
// (numeric "/" keeps only about 16 significant digits and rounds, so a
// ceiling of it differed from Cost for large values); the result is
// capped at the largest bigint. Negative arguments count as zero.
func costSQL(promptTokens, completionTokens, promptPrice, completionPrice string) string {
	return fmt.Sprintf("LEAST(div(GREATEST(%s, 0)::numeric * GREATEST(%s, 0) + GREATEST(%s, 0)::numeric * GREATEST(%s, 0) + %d, %d), %d)::bigint",
		promptTokens, promptPrice, completionTokens, completionPrice, tokensPerPrice-1, tokensPerPrice, maxBigint)
}

// clampOutput returns the output cap: the client's max_tokens (or the
// model's when unset), at most the model's max_output_tokens and the room
// the prompt leaves in the context.
func clampOutput(r Reservation, m modelTerms) (int64, error) {
	if !fitsContext(r.PromptTokens, m.maxContext) {
		return 0, fmt.Errorf("prompt of %d tokens, context of %d: %w", r.PromptTokens, m.maxContext, ErrContextTooLong)
	}
	out := m.maxOutput
	if r.MaxOutputTokens > 0 {
		out = min(out, r.MaxOutputTokens)
	}
	return min(out, m.maxContext-r.PromptTokens), nil
}

// fitsContext reports whether a prompt leaves room for one output token in
// the context: clampOutput refuses the request otherwise.
func fitsContext(promptTokens, maxContext int64) bool { return maxContext-promptTokens >= 1 }

// fitsContextSQL is fitsContext as a PostgreSQL condition.
func fitsContextSQL(promptTokens, maxContext string) string {
	return fmt.Sprintf("(%s - %s >= 1)", maxContext, promptTokens)
}

// clampSQL is clampOutput's cap as a PostgreSQL expression, for a request
// fitsContextSQL admits: maxTokens is the client's max_tokens, 0 when
// unset.
func clampSQL(promptTokens, maxTokens, maxContext, maxOutput string) string {
	return fmt.Sprintf("LEAST(%[4]s, CASE WHEN %[2]s > 0 THEN %[2]s ELSE %[4]s END, %[3]s - %[1]s)",
		promptTokens, maxTokens, maxContext, maxOutput)
}

// boundCompletionSQL is BoundUsage's completion count with nothing
// relayed, as a PostgreSQL expression of the reported count and the
// output cap.
func boundCompletionSQL(completion, maxOutput string) string {
	return fmt.Sprintf("CASE WHEN %[2]s > 0 THEN LEAST(GREATEST(%[1]s, 0), %[2]s) ELSE GREATEST(%[1]s, 0) END",
		completion, maxOutput)
}

// boundPromptSQL is BoundUsage's prompt count with nothing relayed, as a
// PostgreSQL expression of the reported prompt, the prompt estimate, the
// output cap and the completion already bounded (boundCompletionSQL).
func boundPromptSQL(prompt, estimate, maxOutput, boundCompletion string) string {
	return fmt.Sprintf("CASE WHEN %[3]s > 0 THEN LEAST(GREATEST(%[1]s, 0), LEAST(GREATEST(%[2]s, 0)::numeric + %[3]s, %[5]d) - %[4]s)::bigint ELSE GREATEST(%[1]s, 0) END",
		prompt, estimate, maxOutput, boundCompletion, maxBigint)
}

// negativeSQL is BoundUsage's Negative correction as a PostgreSQL
// condition on the reported counts.
func negativeSQL(prompt, completion string) string {
	return fmt.Sprintf("(%s < 0 OR %s < 0)", prompt, completion)
}

// overReservedSQL is BoundUsage's OverReserved correction as a PostgreSQL
// condition: a bounded count is below the reported one (negatives counted
// as zero).
func overReservedSQL(prompt, completion, boundPrompt, boundCompletion string) string {
	return fmt.Sprintf("(%s < GREATEST(%s, 0) OR %s < GREATEST(%s, 0))", boundPrompt, prompt, boundCompletion, completion)
}

// partialSources are the sources whose settles follow the partial rule
// (partialUsage): a request that did not finish.
var partialSources = []Source{SourcePartial, SourceNodeLog}

// partial reports whether a settle from s follows the partial rule.
func (s Source) partial() bool {
	for _, p := range partialSources {
		if s == p {
			return true
		}
	}
	return false
}

// partialSourceSQL is Source.partial as a PostgreSQL condition on a
// settle_source expression.
func partialSourceSQL(src string) string {
	quoted := make([]string, len(partialSources))
	for i, s := range partialSources {
		quoted[i] = "'" + string(s) + "'"
	}
	return fmt.Sprintf("(%s IN (%s))", src, strings.Join(quoted, ", "))
}

// partialUsage is the one rule for a request that did not finish: nothing
// produced (no output and no prompt count) cancels it; output without a
// prompt count (a stream that broke before the engine's usage came, a
// node's done record of an abort) bills the prompt at the reservation's
// estimate, kept in the reserved row's prompt_tokens.
func partialUsage(u Usage, promptEstimate int64) (Usage, bool) {
	if u.PromptTokens == 0 && u.CompletionTokens == 0 {
		return u, false
	}
	if u.PromptTokens == 0 {
		u.PromptTokens = promptEstimate
	}
	return u, true
}

// partialNothingSQL is partialUsage's "nothing produced" as a PostgreSQL
// condition on the (bounded) counts.
func partialNothingSQL(prompt, completion string) string {
	return fmt.Sprintf("(%s = 0 AND %s = 0)", prompt, completion)
}

// partialPromptSQL is partialUsage's prompt count as a PostgreSQL
// expression, for a request that produced something.
func partialPromptSQL(prompt, estimate string) string {
	return fmt.Sprintf("CASE WHEN %[1]s = 0 THEN %[2]s ELSE %[1]s END", prompt, estimate)
}

// charge is what a settle debits for usage that costs full under a
// reservation of reserved: never more than the reservation, which is what
// the client was promised and what admission checked against the balance.
// capped reports that the usage cost more.
func charge(full, reserved int64) (cost int64, capped bool) {
	return min(full, reserved), full > reserved
}

// chargeSQL is charge's cost as a PostgreSQL expression.
func chargeSQL(full, reserved string) string {
	return fmt.Sprintf("LEAST(%s, %s)", full, reserved)
}

// chargeCappedSQL is charge's capped as a PostgreSQL condition.
func chargeCappedSQL(full, reserved string) string {
	return fmt.Sprintf("(%s > %s)", full, reserved)
}
