package urlguard

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes one call of f allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxBytesPerByte bounds what CheckJSON allocates per byte of a body: the
// decode into interfaces boxes every value, about 16 bytes per byte of
// "[0,0,0...", with room.
const maxBytesPerByte = 32

// TestCheckJSONMemoryIsLinear: a long key above many values, or above
// many URLs, costs memory linear in the body. A path string built for
// every value below the key cost its length each time: a 64 KiB key above
// 8000 zeros allocated half a gigabyte.
func TestCheckJSONMemoryIsLinear(t *testing.T) {
	key := strings.Repeat("k", 64<<10)
	tests := []struct {
		name, body string
		path       string // of the refusal, "" when accepted
	}{
		{"long key above many values", `{"` + key + `":[0` + strings.Repeat(",0", 8000) + `],"x":"a:b"}`, ""},
		{"long key above many urls", `{"` + key + `":["http://a.example"` + strings.Repeat(`,"http://a.example"`, 4*MaxURLs) + `]}`,
			key + "[64]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Guard{Resolver: resolver}
			var err error
			got := allocated(func() { err = g.CheckJSON(context.Background(), []byte(tt.body)) })
			var be *BlockedError
			switch {
			case tt.path == "" && err != nil:
				t.Errorf("CheckJSON = %v, want nil", err)
			case tt.path != "" && (!errors.As(err, &be) || be.Path != tt.path):
				t.Errorf("CheckJSON = %v, want a refusal at the %d-th URL", err, MaxURLs+1)
			}
			t.Logf("%d bytes allocated for a %d-byte body", got, len(tt.body))
			if limit := uint64(maxBytesPerByte*len(tt.body) + 64<<10); got > limit {
				t.Errorf("CheckJSON allocated %d bytes for a %d-byte body, want at most %d", got, len(tt.body), limit)
			}
		})
	}
}
