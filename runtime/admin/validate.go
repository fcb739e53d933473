package admin

import (
	"fmt"
	"github.com/llmplat/llmplat/runtime/auth"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode"
)

// Limits on input, each with its reason.
const (
	// maxBodyBytes bounds a request body: admin bodies are a few hundred
	// bytes, and an allowlist of maxAllowlist names fits with room.
	maxBodyBytes = 1 << 20
	// maxAllowlist bounds a key's model allowlist: the platform serves a
	// handful of models, so a thousand names is a mistake, not a need.
	maxAllowlist = 1000
	// maxKeyNameLen and maxNoteLen bound free text shown in listings.
	maxKeyNameLen = 200
	maxNoteLen    = 1000
	// maxIdempotencyKeyLen fits a UUID or a Terraform resource address with
	// room; longer is a mistake.
	maxIdempotencyKeyLen = 200
	// maxServedNameLen fits the longest Hugging Face repository ids.
	maxServedNameLen = 256
	// maxCreditMicro bounds one credit entry (a billion credits), as the
	// ledger does: far above any real grant, far below an overflow.
	maxCreditMicro = 1_000_000_000 * 1_000_000
)

// identRe is the shape of team, model and node names: they appear in URL
// paths, JWT claims and Redis keys (which forbid braces and spaces).
var identRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// identRule describes identRe in error messages.
const identRule = "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"

// fieldError is a 400 about one request field.
type fieldError struct {
	param string
	msg   string
}

func (e *fieldError) Error() string { return e.param + ": " + e.msg }

// invalid returns a fieldError for param.
func invalid(param, format string, args ...any) *fieldError {
	return &fieldError{param: param, msg: fmt.Sprintf(format, args...)}
}

// checkIdent checks a team, model or node name.
func checkIdent(param, s string) *fieldError {
	if !identRe.MatchString(s) {
		return invalid(param, "%s must be %s", param, identRule)
	}
	return nil
}

// checkText checks free text: at most max bytes, no control characters.
func checkText(param, s string, max int) *fieldError {
	if len(s) > max {
		return invalid(param, "%s must be at most %d bytes", param, max)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return invalid(param, "%s must not contain control characters", param)
	}
	return nil
}

// checkLimit checks a limit: 0 (unlimited) up to max.
func checkLimit(param string, v, max int64) *fieldError {
	if v < 0 || v > max {
		return invalid(param, "%s must be between 0 (unlimited) and %d", param, max)
	}
	return nil
}

// checkAllowlist checks model names: each an identifier, no duplicates.
func checkAllowlist(list []string) *fieldError {
	const param = "model_allowlist"
	if len(list) > maxAllowlist {
		return invalid(param, "model_allowlist holds at most %d models", maxAllowlist)
	}
	seen := make(map[string]bool, len(list))
	for _, m := range list {
		if !identRe.MatchString(m) {
			return invalid(param, "model name %q must be %s", m, identRule)
		}
		if seen[m] {
			return invalid(param, "model %q is listed twice", m)
		}
		seen[m] = true
	}
	return nil
}

// checkIdempotencyKey checks an Idempotency-Key header or field.
func checkIdempotencyKey(param, k string) *fieldError {
	if len(k) > maxIdempotencyKeyLen || strings.ContainsFunc(k, func(r rune) bool { return r < '!' || r > '~' }) {
		return invalid(param, "%s must be at most %d printable ASCII characters without spaces", param, maxIdempotencyKeyLen)
	}
	return nil
}

// validateCreateKey checks a key create at now.
func validateCreateKey(r *CreateKeyRequest, now time.Time) *fieldError {
	if r.TeamID <= 0 {
		return invalid("team_id", "team_id must be a positive team id")
	}
	if e := checkText("name", r.Name, maxKeyNameLen); e != nil {
		return e
	}
	if e := checkAllowlist(r.ModelAllowlist); e != nil {
		return e
	}
	if e := checkLimits(&r.RPM, &r.TokensPerDay, &r.MaxStreams, &r.MaxTokens); e != nil {
		return e
	}
	if r.ExpiresAt != nil && !r.ExpiresAt.After(now) {
		return invalid("expires_at", "expires_at must be in the future")
	}
	return checkSuppliedKey(r.Key)
}

// checkSuppliedKey checks a client-minted secret; empty means none.
func checkSuppliedKey(k string) *fieldError {
	if k != "" && !auth.LooksLikeKey(k) {
		return invalid("key", "key must be %q followed by 43 base62 characters, as a generated key", auth.KeyPrefix)
	}
	return nil
}

// validateUpdateKey checks a key patch.
func validateUpdateKey(r *UpdateKeyRequest) *fieldError {
	if r.Name != nil {
		if e := checkText("name", *r.Name, maxKeyNameLen); e != nil {
			return e
		}
	}
	if r.ModelAllowlist != nil {
		if e := checkAllowlist(*r.ModelAllowlist); e != nil {
			return e
		}
	}
	return checkLimits(r.RPM, r.TokensPerDay, r.MaxStreams, r.MaxTokens)
}

// checkLimits checks the limits that are present (not nil). rpm,
// max_streams and max_tokens are INTEGER columns (max_tokens is bounded as
// a model's max_context_tokens is: a larger cap is no cap).
func checkLimits(rpm *int, tokensPerDay *int64, maxStreams, maxTokens *int) *fieldError {
	if rpm != nil {
		if e := checkLimit("rpm", int64(*rpm), math.MaxInt32); e != nil {
			return e
		}
	}
	if tokensPerDay != nil {
		if e := checkLimit("tokens_per_day", *tokensPerDay, math.MaxInt64); e != nil {
			return e
		}
	}
	if maxStreams != nil {
		if e := checkLimit("max_streams", int64(*maxStreams), math.MaxInt32); e != nil {
			return e
		}
	}
	if maxTokens != nil {
		if e := checkLimit("max_tokens", int64(*maxTokens), math.MaxInt32); e != nil {
			return e
		}
	}
	return nil
}

// modelFields are the fields a PUT of a model must carry.
var modelFields = []string{"served_name", "prompt_price_micro_per_mtok", "completion_price_micro_per_mtok",
	"max_context_tokens", "max_output_tokens"}

// validateModel checks a model spec whose JSON carried the fields in
// present.
func validateModel(s *ModelSpec, present map[string]bool) *fieldError {
	for _, f := range modelFields {
		if !present[f] {
			return invalid(f, "%s is required", f)
		}
	}
	switch {
	case s.ServedName == "" || len(s.ServedName) > maxServedNameLen ||
		strings.ContainsFunc(s.ServedName, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return invalid("served_name", "served_name must be 1 to %d characters without spaces", maxServedNameLen)
	case s.PromptPriceMicroPerMTok < 0:
		return invalid("prompt_price_micro_per_mtok", "prompt_price_micro_per_mtok must not be negative")
	case s.CompletionPriceMicroPerMTok < 0:
		return invalid("completion_price_micro_per_mtok", "completion_price_micro_per_mtok must not be negative")
	case s.MaxContextTokens <= 0 || s.MaxContextTokens > math.MaxInt32:
		return invalid("max_context_tokens", "max_context_tokens must be a positive 32-bit integer")
	case s.MaxOutputTokens <= 0:
		return invalid("max_output_tokens", "max_output_tokens must be positive")
	case s.MaxOutputTokens > s.MaxContextTokens:
		return invalid("max_output_tokens", "max_output_tokens must not exceed max_context_tokens")
	}
	return nil
}

// validateCredit checks a credit grant.
func validateCredit(r *CreditRequest) *fieldError {
	switch {
	case r.TeamID <= 0:
		return invalid("team_id", "team_id must be a positive team id")
	case r.AmountMicrocredits == 0 || r.AmountMicrocredits > maxCreditMicro || r.AmountMicrocredits < -maxCreditMicro:
		return invalid("amount_microcredits", "amount_microcredits must be non-zero and at most %d in absolute value", int64(maxCreditMicro))
	case r.IdempotencyKey == "":
		return invalid("idempotency_key", "idempotency_key is required, so that a retried grant is applied once")
	}
	if e := checkIdempotencyKey("idempotency_key", r.IdempotencyKey); e != nil {
		return e
	}
	return checkText("note", r.Note, maxNoteLen)
}

// CheckName reports whether s is a name the admin API takes for a team,
// model or node, with the rule when it is not: for clients that check
// before they call (the Terraform provider, at plan time).
func CheckName(s string) error {
	if !identRe.MatchString(s) {
		return fmt.Errorf("must be %s", identRule)
	}
	return nil
}
