package admin

import (
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/adminrules"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/credential"
)

// Limits on input, each with its reason; the rules the provider shares
// live in runtime/adminrules.
const (
	// maxBodyBytes bounds a request body: admin bodies are a few hundred
	// bytes, and an allowlist of adminrules.MaxAllowlist names fits with room.
	maxBodyBytes = 1 << 20
)

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

// refused turns a shared rule's refusal into a fieldError; nil stays nil.
func refused(e *adminrules.FieldError) *fieldError {
	if e == nil {
		return nil
	}
	return &fieldError{param: e.Field, msg: e.Msg}
}

// checkIdent checks a team, model or node name.
func checkIdent(param, s string) *fieldError { return refused(adminrules.Ident(param, s)) }

// checkIdempotencyKey checks an Idempotency-Key header or field.
func checkIdempotencyKey(param, k string) *fieldError {
	return refused(adminrules.IdempotencyKey(param, k))
}

// validateCreateKey checks a key create at now.
func validateCreateKey(r *adminwire.CreateKeyRequest, now time.Time) *fieldError {
	if e := firstRefusal(adminrules.TeamID(r.TeamID), adminrules.KeyName(r.Name),
		adminrules.Allowlist(r.ModelAllowlist)); e != nil {
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

// firstRefusal returns the first of the rules' refusals, or nil.
func firstRefusal(es ...*adminrules.FieldError) *fieldError {
	for _, e := range es {
		if e != nil {
			return refused(e)
		}
	}
	return nil
}

// checkSuppliedKey checks a client-minted secret; empty means none.
func checkSuppliedKey(k string) *fieldError {
	if k != "" && !credential.LooksLikeKey(k) {
		return invalid("key", "key must be %q followed by 43 base62 characters, as a generated key", credential.KeyPrefix)
	}
	return nil
}

// validateUpdateKey checks a key patch.
func validateUpdateKey(r *adminwire.UpdateKeyRequest) *fieldError {
	if r.Name != nil {
		if e := refused(adminrules.KeyName(*r.Name)); e != nil {
			return e
		}
	}
	if r.ModelAllowlist != nil {
		if e := refused(adminrules.Allowlist(*r.ModelAllowlist)); e != nil {
			return e
		}
	}
	return checkLimits(r.RPM, r.TokensPerDay, r.MaxStreams, r.MaxTokens)
}

// checkLimits checks the limits that are present (not nil).
func checkLimits(rpm *int, tokensPerDay *int64, maxStreams, maxTokens *int) *fieldError {
	if rpm != nil {
		if e := adminrules.Limit("rpm", int64(*rpm), adminrules.MaxInt32Limit); e != nil {
			return refused(e)
		}
	}
	if tokensPerDay != nil {
		if e := adminrules.Limit("tokens_per_day", *tokensPerDay, adminrules.MaxInt64Limit); e != nil {
			return refused(e)
		}
	}
	if maxStreams != nil {
		if e := adminrules.Limit("max_streams", int64(*maxStreams), adminrules.MaxInt32Limit); e != nil {
			return refused(e)
		}
	}
	if maxTokens != nil {
		if e := adminrules.Limit("max_tokens", int64(*maxTokens), adminrules.MaxInt32Limit); e != nil {
			return refused(e)
		}
	}
	return nil
}

// modelFields are the fields a PUT of a model must carry.
var modelFields = []string{"served_name", "prompt_price_micro_per_mtok", "completion_price_micro_per_mtok",
	"max_context_tokens", "max_output_tokens"}

// validateModel checks a model spec whose JSON carried the fields in
// present.
func validateModel(s *adminwire.ModelSpec, present map[string]bool) *fieldError {
	for _, f := range modelFields {
		if !present[f] {
			return invalid(f, "%s is required", f)
		}
	}
	return firstRefusal(adminrules.ServedName(s.ServedName),
		adminrules.Price("prompt_price_micro_per_mtok", s.PromptPriceMicroPerMTok),
		adminrules.Price("completion_price_micro_per_mtok", s.CompletionPriceMicroPerMTok),
		adminrules.MaxContextTokens(int64(s.MaxContextTokens)),
		adminrules.MaxOutputTokens(int64(s.MaxOutputTokens), int64(s.MaxContextTokens)))
}

// validateCredit checks a credit grant.
func validateCredit(r *adminwire.CreditRequest) *fieldError {
	if e := firstRefusal(adminrules.TeamID(r.TeamID), adminrules.CreditAmount(r.AmountMicrocredits)); e != nil {
		return e
	}
	if r.IdempotencyKey == "" {
		return invalid("idempotency_key", "idempotency_key is required, so that a retried grant is applied once")
	}
	if e := checkIdempotencyKey("idempotency_key", r.IdempotencyKey); e != nil {
		return e
	}
	return refused(adminrules.Note(r.Note))
}
