package ledger

import (
	"errors"
	"testing"
	"time"
)

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "negative sweep age", cfg: Config{SweepAfter: -time.Second}},
		{name: "negative interval", cfg: Config{SweepInterval: -time.Second}},
	}
	f := newFixture(t, "sqlite:"+t.TempDir()+"/l.db")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(f.db, tt.cfg); !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("New = %v, want ErrInvalidInput", err)
			}
		})
	}
	if _, err := New(nil, Config{}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("New(nil) = %v, want ErrInvalidInput", err)
	}
	l, err := New(f.db, Config{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if l.cfg.SweepAfter != DefaultSweepAfter || l.cfg.SweepInterval != DefaultSweepInterval || l.cfg.Clock == nil || l.cfg.Logger == nil {
		t.Fatalf("defaults not filled: %+v", l.cfg)
	}
}
