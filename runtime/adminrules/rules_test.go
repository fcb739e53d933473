package adminrules

import (
	"math"
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	tests := []struct {
		name      string
		err       *FieldError
		wantField string // "" when the value is accepted
		wantMsg   string
	}{
		{"ident ok", Ident("name", "llama-8b"), "", ""},
		{"ident with a space", Ident("name", "a b"), "name", "name must be 1 to 64"},
		{"ident of 65", Ident("name", strings.Repeat("a", 65)), "name", "name must be"},
		{"key name of 200 bytes", KeyName(strings.Repeat("n", MaxKeyNameLen)), "", ""},
		{"key name of 201 bytes", KeyName(strings.Repeat("n", MaxKeyNameLen+1)), "name", "name must be at most 200 bytes"},
		{"key name with a newline", KeyName("ci\nkey"), "name", "name must not contain control characters"},
		{"note with a tab", Note("a\tb"), "note", "note must not contain control characters"},
		{"note of 1001 bytes", Note(strings.Repeat("n", MaxNoteLen+1)), "note", "note must be at most 1000 bytes"},
		{"rpm at 2^31-1", Limit("rpm", math.MaxInt32, MaxInt32Limit), "", ""},
		{"rpm at 2^31", Limit("rpm", math.MaxInt32+1, MaxInt32Limit), "rpm", "rpm must be between 0 (unlimited) and 2147483647"},
		{"negative limit", Limit("max_streams", -1, MaxInt32Limit), "max_streams", "max_streams must be between 0"},
		{"allowlist ok", Allowlist([]string{"a", "b"}), "", ""},
		{"allowlist entry with a slash", Allowlist([]string{"meta/llama"}), "model_allowlist", `model name "meta/llama" must be`},
		{"allowlist empty entry", Allowlist([]string{""}), "model_allowlist", `model name "" must be`},
		{"allowlist duplicate", Allowlist([]string{"a", "a"}), "model_allowlist", `model "a" is listed twice`},
		{"allowlist too long", Allowlist(make([]string, MaxAllowlist+1)), "model_allowlist", "at most 1000 models"},
		{"idempotency key with a space", IdempotencyKey("idempotency_key", "a b"), "idempotency_key", "printable ASCII"},
		{"team id 0", TeamID(0), "team_id", "team_id must be a positive team id"},
		{"credit of zero", CreditAmount(0), "amount_microcredits", "non-zero"},
		{"credit at the bound", CreditAmount(-MaxCreditMicro), "", ""},
		{"credit over the bound", CreditAmount(MaxCreditMicro + 1), "amount_microcredits", "at most 1000000000000000 in absolute value"},
		{"served name ok", ServedName("meta-llama/Llama-3.1-8B-Instruct"), "", ""},
		{"served name empty", ServedName(""), "served_name", "served_name must be 1 to 256 characters without spaces"},
		{"served name with a space", ServedName("a b"), "served_name", "without spaces"},
		{"served name of 257", ServedName(strings.Repeat("s", MaxServedNameLen+1)), "served_name", "without spaces"},
		{"negative price", Price("prompt_price_micro_per_mtok", -1), "prompt_price_micro_per_mtok", "must not be negative"},
		{"context of 2^31", MaxContextTokens(math.MaxInt32 + 1), "max_context_tokens", "positive 32-bit integer"},
		{"context of 0", MaxContextTokens(0), "max_context_tokens", "positive 32-bit integer"},
		{"output equal to context", MaxOutputTokens(8192, 8192), "", ""},
		{"output over context", MaxOutputTokens(8193, 8192), "max_output_tokens", "must not exceed max_context_tokens"},
		{"output of 0", MaxOutputTokens(0, 8192), "max_output_tokens", "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantField == "" {
				if tt.err != nil {
					t.Fatalf("refused: %v", tt.err)
				}
				return
			}
			if tt.err == nil {
				t.Fatalf("accepted, want a refusal of %s", tt.wantField)
			}
			if tt.err.Field != tt.wantField || !strings.HasPrefix(tt.err.Msg, tt.wantMsg) && !strings.Contains(tt.err.Msg, tt.wantMsg) {
				t.Errorf("got %s: %q, want %s: %q", tt.err.Field, tt.err.Msg, tt.wantField, tt.wantMsg)
			}
		})
	}
}

func TestParseTeamID(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		refused bool
	}{
		{"42", 42, false},
		{"team-a", 0, true},
		{"", 0, true},
		{"0", 0, true},
		{"-3", 0, true},
		{"9223372036854775808", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTeamID(tt.in)
			if (err != nil) != tt.refused || got != tt.want {
				t.Fatalf("ParseTeamID(%q) = %d, %v; want %d, refused %v", tt.in, got, err, tt.want, tt.refused)
			}
			if err != nil && (err.Field != "team_id" || !strings.Contains(err.Msg, "team_id must be a positive team id")) {
				t.Errorf("got %s: %q", err.Field, err.Msg)
			}
		})
	}
}
