package gateway

import "testing"

// TestKeyCap: a key's max_tokens caps the ask, and the day's room caps
// both.
func TestKeyCap(t *testing.T) {
	tests := []struct {
		name         string
		asked        int64
		limit        int
		left, prompt int64
		want         int64
	}{
		{"no cap keeps the ask", 500, 0, -1, 20, 500},
		{"no cap, no ask", 0, 0, -1, 20, 0},
		{"no ask takes the cap", 0, 100, -1, 20, 100},
		{"an ask above the cap is clamped", 4000, 100, -1, 20, 100},
		{"an ask at the cap is kept", 100, 100, -1, 20, 100},
		{"an ask below the cap is kept", 20, 100, -1, 20, 20},
		{"the day's room below the cap wins", 4000, 100, 60, 20, 40},
		{"the cap below the day's room wins", 4000, 100, 10_000, 20, 100},
		{"no ask, the day's room below the cap", 0, 100, 60, 20, 40},
		{"an ask below both is kept", 30, 100, 10_000, 20, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dayCap(keyCap(tt.asked, tt.limit), tt.left, tt.prompt); got != tt.want {
				t.Errorf("dayCap(keyCap(%d, %d), %d, %d) = %d, want %d", tt.asked, tt.limit, tt.left, tt.prompt, got, tt.want)
			}
		})
	}
}

// TestDayCap: the day's room left after the prompt caps the ask.
func TestDayCap(t *testing.T) {
	tests := []struct {
		name                string
		asked, left, prompt int64
		want                int64
	}{
		{"no daily limit keeps the ask", 500, -1, 20, 500},
		{"no daily limit, no ask", 0, -1, 20, 0},
		{"room above the ask", 500, 10_000, 20, 500},
		{"ask above the room", 4000, 60, 20, 40},
		{"no ask takes the room", 0, 60, 20, 40},
		{"prompt beyond the room still gets a token", 4000, 10, 20, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dayCap(tt.asked, tt.left, tt.prompt); got != tt.want {
				t.Errorf("dayCap(%d, %d, %d) = %d, want %d", tt.asked, tt.left, tt.prompt, got, tt.want)
			}
		})
	}
}
