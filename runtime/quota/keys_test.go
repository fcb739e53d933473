package quota

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestKeys(t *testing.T) {
	k := NewKeys("llmplat:")
	eastern := time.FixedZone("UTC-5", -5*3600)
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"streams", k.Streams("k_1"), "llmplat:streams:{k_1}"},
		{"rpm", k.RPM("k_1"), "llmplat:rl:{k_1}:rpm"},
		{"tokens per day", k.TokensPerDay("k_1", time.Date(2025, 3, 14, 23, 59, 59, 0, time.UTC)), "llmplat:tpd:{k_1}:20250314"},
		{"tokens per day rolls over at UTC midnight", k.TokensPerDay("k_1", time.Date(2025, 3, 15, 0, 0, 0, 0, time.UTC)), "llmplat:tpd:{k_1}:20250315"},
		{"tokens per day takes the UTC day of a zoned time", k.TokensPerDay("k_1", time.Date(2025, 3, 14, 22, 0, 0, 0, eastern)), "llmplat:tpd:{k_1}:20250315"},
		{"queue", k.Queue("llama-8b"), "llmplat:q:{llama-8b}"},
		{"queue sequence", k.QueueSeq("llama-8b"), "llmplat:q:{llama-8b}:seq"},
		{"queue wake channel", k.QueueWake("llama-8b"), "llmplat:q:{llama-8b}:wake"},
		{"empty prefix", NewKeys("").Streams("k_1"), "streams:{k_1}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestConfigRejects(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"prefix with a hash tag", Config{Prefix: "{x}:"}},
		{"negative duration", Config{MaxStreamDuration: -time.Second}},
		{"duration below a millisecond", Config{MaxStreamDuration: time.Microsecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.cfg.withDefaults(); err == nil {
				t.Errorf("withDefaults(%+v) = nil error, want one", tt.cfg)
			}
		})
	}
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"plain", "k_123", true},
		{"request id", "req_0123abcd", true},
		{"empty", "", false},
		{"brace", "a}b", false},
		{"space", "a b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkName("id", tt.in)
			if got := err == nil; got != tt.ok {
				t.Fatalf("checkName(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidName) {
				t.Errorf("checkName(%q) = %v, want ErrInvalidName", tt.in, err)
			}
		})
	}
}

// hashTag returns the part of key Redis Cluster hashes: the text between
// the first '{' and the next '}', when not empty.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// TestScriptKeysShareASlot: the keys one script touches must hash to one
// cluster slot, whatever the prefix.
func TestScriptKeysShareASlot(t *testing.T) {
	k := NewKeys("llmplat:")
	tests := []struct {
		name string
		keys []string
		want string
	}{
		{"queue and its sequence", []string{k.Queue("llama-8b"), k.QueueSeq("llama-8b")}, "llama-8b"},
		{"a key's limits", []string{k.Streams("k_1"), k.RPM("k_1"), k.TokensPerDay("k_1", time.Unix(0, 0))}, "k_1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, key := range tt.keys {
				if got := hashTag(key); got != tt.want {
					t.Errorf("hash tag of %s = %q, want %q", key, got, tt.want)
				}
			}
		})
	}
}
