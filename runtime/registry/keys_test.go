package registry

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestKeys(t *testing.T) {
	k := NewKeys("llmplat:")
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"node record", k.Node("fra-gpu-07"), "llmplat:node:{fra-gpu-07}"},
		{"epoch counter", k.Epoch("fra-gpu-07"), "llmplat:node:{fra-gpu-07}:epoch"},
		{"tombstone", k.Left("fra-gpu-07"), "llmplat:node:{fra-gpu-07}:left"},
		{"live index", k.Live(), "llmplat:nodes:live"},
		{"registration counter", k.Registrations(1733150000), "llmplat:reg:{1733150000}"},
		{"node channel", k.NodeChannel("fra-gpu-07"), "llmplat:node:{fra-gpu-07}:in"},
		{"replica channel", k.ReplicaChannel("orch-1"), "llmplat:orch:{orch-1}:replies"},
		{"completion", k.Completion("req_3f00"), "llmplat:done:{req_3f00}"},
		{"completion nodes", k.CompletionNodes("req_3f00"), "llmplat:done:{req_3f00}:nodes"},
		{"node registrations", k.NodeRegistrations("fra-gpu-07"), "llmplat:node:{fra-gpu-07}:regs"},
		{"empty prefix", NewKeys("").Node("n1"), "node:{n1}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
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

// TestNodeKeysShareASlot: every script touches only one node's keys, which
// must hash to one cluster slot whatever the prefix.
func TestNodeKeysShareASlot(t *testing.T) {
	for _, prefix := range []string{"", "llmplat:", "t0123:"} {
		t.Run("prefix "+prefix, func(t *testing.T) {
			k := NewKeys(prefix)
			for _, key := range []string{k.Node("n-1"), k.Epoch("n-1"), k.Left("n-1")} {
				if got := hashTag(key); got != "n-1" {
					t.Errorf("hash tag of %s = %q, want %q", key, got, "n-1")
				}
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatalf("withDefaults: %v", err)
	}
	if c.TTL != DefaultTTL || c.WatchInterval != DefaultWatchInterval {
		t.Errorf("got ttl %v, interval %v, want %v, %v", c.TTL, c.WatchInterval, DefaultTTL, DefaultWatchInterval)
	}
	if c.Clock == nil || c.Jitter == nil || c.Logger == nil {
		t.Errorf("got nil clock, jitter or logger after defaults")
	}
	if got := c.tombstoneRetention(); got < c.TTL+c.WatchInterval {
		t.Errorf("tombstone retention %v, want at least ttl + interval %v", got, c.TTL+c.WatchInterval)
	}
}

func TestConfigRejects(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"prefix with a hash tag", Config{Prefix: "{x}:"}},
		{"negative ttl", Config{TTL: -time.Second}},
		{"ttl below a millisecond", Config{TTL: time.Microsecond}},
		{"interval as long as the ttl", Config{TTL: time.Second, WatchInterval: time.Second}},
		{"default interval over a short ttl", Config{TTL: 300 * time.Millisecond}},
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
		{"pod name", "vllm-8b-0.vllm-8b", true},
		{"empty", "", false},
		{"brace", "a}b", false},
		{"space", "a b", false},
		{"longer than a DNS name", strings.Repeat("a", maxNodeIDLen+1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkName("node id", tt.in)
			if got := err == nil; got != tt.ok {
				t.Fatalf("checkName(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidName) {
				t.Errorf("checkName(%q) = %v, want ErrInvalidName", tt.in, err)
			}
		})
	}
}
