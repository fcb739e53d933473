package adminrules

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Limits on values, each with its reason.
const (
	// MaxAllowlist bounds a key's model allowlist: the platform serves a
	// handful of models, so a thousand names is a mistake, not a need.
	MaxAllowlist = 1000
	// MaxKeyNameLen and MaxNoteLen bound free text shown in listings.
	MaxKeyNameLen = 200
	MaxNoteLen    = 1000
	// MaxIdempotencyKeyLen fits a UUID or a Terraform resource address with
	// room; longer is a mistake.
	MaxIdempotencyKeyLen = 200
	// MaxServedNameLen fits the longest Hugging Face repository ids.
	MaxServedNameLen = 256
	// MaxCreditMicro bounds one credit entry (a billion credits), as the
	// ledger does: far above any real grant, far below an overflow.
	MaxCreditMicro = 1_000_000_000 * 1_000_000
	// MaxInt32Limit bounds rpm, max_streams, max_tokens and
	// max_context_tokens: they are INTEGER columns, and a larger value is
	// no limit anyway.
	MaxInt32Limit = math.MaxInt32
	// MaxInt64Limit bounds tokens_per_day, a BIGINT column.
	MaxInt64Limit = math.MaxInt64
	// MaxPersonalKeyDays bounds a team's personal_key_max_days (ten
	// years, as the column's CHECK): a personal key is meant to expire.
	MaxPersonalKeyDays = 3650
	// DefaultPersonalKeyDays is a team's personal_key_max_days until the
	// platform sets it: a quarter, the usual rotation period.
	DefaultPersonalKeyDays = 90
)

// identRe is the shape of team, model and node names: they appear in URL
// paths, JWT claims and Redis keys (which forbid braces and spaces).
var identRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// IdentRule describes a valid name in messages.
const IdentRule = "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"

// FieldError is a refusal of one request field.
type FieldError struct {
	// Field is the request field (and provider attribute) at fault.
	Field string
	// Msg says what the field must be; it names the field.
	Msg string
}

func (e *FieldError) Error() string { return e.Msg }

func invalid(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Ident checks a team, model or node name given in field.
func Ident(field, s string) *FieldError {
	if !identRe.MatchString(s) {
		return invalid(field, "%s must be %s", field, IdentRule)
	}
	return nil
}

// Text checks free text: at most max bytes, no control characters.
func Text(field, s string, max int) *FieldError {
	if len(s) > max {
		return invalid(field, "%s must be at most %d bytes", field, max)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return invalid(field, "%s must not contain control characters", field)
	}
	return nil
}

// KeyName checks an API key's name.
func KeyName(s string) *FieldError { return Text("name", s, MaxKeyNameLen) }

// PersonalKeyMaxDays checks a team's personal_key_max_days.
func PersonalKeyMaxDays(v int64) *FieldError {
	if v < 1 || v > MaxPersonalKeyDays {
		return invalid("personal_key_max_days", "personal_key_max_days must be between 1 and %d", MaxPersonalKeyDays)
	}
	return nil
}

// Note checks a credit grant's note.
func Note(s string) *FieldError { return Text("note", s, MaxNoteLen) }

// Limit checks a limit: 0 (unlimited) up to max.
func Limit(field string, v, max int64) *FieldError {
	if v < 0 || v > max {
		return invalid(field, "%s must be between 0 (unlimited) and %d", field, max)
	}
	return nil
}

// Allowlist checks a key's model allowlist: each an identifier, no
// duplicates.
func Allowlist(list []string) *FieldError {
	const field = "model_allowlist"
	if len(list) > MaxAllowlist {
		return invalid(field, "model_allowlist holds at most %d models", MaxAllowlist)
	}
	seen := make(map[string]bool, len(list))
	for _, m := range list {
		if !identRe.MatchString(m) {
			return invalid(field, "model name %q must be %s", m, IdentRule)
		}
		if seen[m] {
			return invalid(field, "model %q is listed twice", m)
		}
		seen[m] = true
	}
	return nil
}

// IdempotencyKey checks an Idempotency-Key header or field.
func IdempotencyKey(field, k string) *FieldError {
	if len(k) > MaxIdempotencyKeyLen || strings.ContainsFunc(k, func(r rune) bool { return r < '!' || r > '~' }) {
		return invalid(field, "%s must be at most %d printable ASCII characters without spaces", field, MaxIdempotencyKeyLen)
	}
	return nil
}

// teamIDRule is the team_id rule in messages.
const teamIDRule = "team_id must be a positive team id"

// TeamID checks a team id.
func TeamID(id int64) *FieldError {
	if id <= 0 {
		return invalid("team_id", teamIDRule)
	}
	return nil
}

// ParseTeamID reads a team id written in decimal, as the provider holds it
// (llmplat_team.<name>.id), and checks it.
func ParseTeamID(s string) (int64, *FieldError) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, invalid("team_id", "%s, got %q", teamIDRule, s)
	}
	return id, nil
}

// CreditAmount checks a credit grant's amount in microcredits.
func CreditAmount(v int64) *FieldError {
	if v == 0 || v > MaxCreditMicro || v < -MaxCreditMicro {
		return invalid("amount_microcredits", "amount_microcredits must be non-zero and at most %d in absolute value", int64(MaxCreditMicro))
	}
	return nil
}

// ServedName checks the name a model's engines answer to.
func ServedName(s string) *FieldError {
	if s == "" || len(s) > MaxServedNameLen ||
		strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return invalid("served_name", "served_name must be 1 to %d characters without spaces", MaxServedNameLen)
	}
	return nil
}

// Price checks a model's price per million tokens, given in field.
func Price(field string, v int64) *FieldError {
	if v < 0 {
		return invalid(field, "%s must not be negative", field)
	}
	return nil
}

// MaxContextTokens checks a model's longest context.
func MaxContextTokens(v int64) *FieldError {
	if v <= 0 || v > MaxInt32Limit {
		return invalid("max_context_tokens", "max_context_tokens must be a positive 32-bit integer")
	}
	return nil
}

// MaxOutputTokens checks a model's longest answer against its longest
// context.
func MaxOutputTokens(out, context int64) *FieldError {
	switch {
	case out <= 0:
		return invalid("max_output_tokens", "max_output_tokens must be positive")
	case out > context:
		return invalid("max_output_tokens", "max_output_tokens must not exceed max_context_tokens")
	}
	return nil
}

// Limits on an on-premises node's declaration, each with its reason.
const (
	// MaxNodeLabels bounds a node's labels: inventory tags (site, rack,
	// owner), shown in every /admin/nodes listing.
	MaxNodeLabels = 64
	// MaxNodeLabelLen bounds a label's key and its value, as Kubernetes
	// bounds a label value's name part.
	MaxNodeLabelLen = 63
)

// NodeCount checks a count of a node's declaration given in field: an
// engine limit (max_num_seqs, max_model_len, kv_cache_tokens) or its GPUs.
// The agent reads them as Go ints and the store keeps them as INTEGER.
func NodeCount(field string, v int64) *FieldError {
	if v < 1 || v > MaxInt32Limit {
		return invalid(field, "%s must be 1 to %d", field, int64(MaxInt32Limit))
	}
	return nil
}

// NodeLabels checks a node's labels: at most MaxNodeLabels, each key 1 to
// MaxNodeLabelLen bytes and each value at most that, without control
// characters (they are shown in listings and the console).
func NodeLabels(labels map[string]string) *FieldError {
	if len(labels) > MaxNodeLabels {
		return invalid("labels", "labels must hold at most %d labels", MaxNodeLabels)
	}
	for k, v := range labels {
		if k == "" || len(k) > MaxNodeLabelLen || len(v) > MaxNodeLabelLen ||
			strings.ContainsFunc(k+v, unicode.IsControl) {
			return invalid("labels", "labels must have keys of 1 to %d bytes and values of at most %d, without control characters",
				MaxNodeLabelLen, MaxNodeLabelLen)
		}
	}
	return nil
}
