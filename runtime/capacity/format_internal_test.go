package capacity

import "testing"

func TestFormatHelpers(t *testing.T) {
	tests := []struct {
		name      string
		got, want string
	}{
		{"KV per token in KiB", bytesHuman(131072), "128 KiB"},
		{"2k context in MiB", bytesHuman(256 * MiB), "256 MiB"},
		{"8k context in GiB without .0", bytesHuman(1 * GiB), "1 GiB"},
		{"KV cache to 0.1 GiB", bytesHuman(22.64 * GiB), "22.6 GiB"},
		{"under a KiB", bytesHuman(512), "512 B"},
		{"thousands", thousands(185488), "185,488"},
		{"thousands, small", thousands(999), "999"},
		{"thousands, negative", thousands(-14600), "-14,600"},
		{"approx of a cost", approx(2.5 / 5.4), "0.46"},
		{"approx of a ratio", approx(140.0 / 32), "4.4"},
		{"approx of a count", approx(112), "110"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}
