package costreport

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// hour is the fixture week's start plus h hours.
func hour(h float64) time.Time { return week.From.Add(time.Duration(h * float64(time.Hour))) }

func TestUpIntervals(t *testing.T) {
	ev := func(kind string, h float64) nodeEvent { return nodeEvent{kind: kind, at: hour(h)} }
	span := func(from, to float64) Window { return Window{From: hour(from), To: hour(to)} }
	w := span(0, 168)
	tests := []struct {
		name   string
		events []nodeEvent
		want   []Window
	}{
		{"no events", nil, nil},
		{"registered before the window, never left", []nodeEvent{ev("register", -5)}, []Window{span(0, 168)}},
		{"register to deregister", []nodeEvent{ev("register", 2), ev("deregister", 5)}, []Window{span(2, 5)}},
		{"drain closes", []nodeEvent{ev("register", 2), ev("drain", 4), ev("deregister", 5)}, []Window{span(2, 4)}},
		{"a second register while up is a reconnect", []nodeEvent{ev("register", 1), ev("register", 3), ev("drain", 6)},
			[]Window{span(1, 6)}},
		{"a deregister while down changes nothing", []nodeEvent{ev("deregister", 1), ev("register", 2), ev("drain", 3)},
			[]Window{span(2, 3)}},
		{"two intervals", []nodeEvent{ev("register", 1), ev("drain", 2), ev("register", 160), ev("deregister", 170)},
			[]Window{span(1, 2), span(160, 168)}},
		{"gone before the window", []nodeEvent{ev("register", -9), ev("deregister", -1)}, nil},
		{"registered at the window's end", []nodeEvent{ev("register", 168)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := upIntervals(tt.events, w); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHourBuckets(t *testing.T) {
	w := Window{From: hour(0.5), To: hour(2.25)}
	want := []Window{{hour(0.5), hour(1)}, {hour(1), hour(2)}, {hour(2), hour(2.25)}}
	if got := w.hourBuckets(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestNodeTimeOffTheHour checks that GPU time in a clock hour cut by an up
// interval counts only the part inside it, idle or not by the whole hour.
func TestNodeTimeOffTheHour(t *testing.T) {
	ups := []Window{{hour(0.5), hour(2.25)}}
	active := func(t time.Time) bool { return t.Equal(hour(1)) }
	got := nodeTime(ups, 2, 3, active)
	want := GPUTime{GPUHours: 1.75 * 2, IdleGPUHours: (0.5 + 0.25) * 2, CostUSD: 1.75 * 2 * 3}
	if !approxEqual(got.GPUHours, want.GPUHours) || !approxEqual(got.IdleGPUHours, want.IdleGPUHours) ||
		!approxEqual(got.CostUSD, want.CostUSD) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestModelNames(t *testing.T) {
	tests := []struct {
		name, raw string
		want      []string
		wantErr   bool
	}{
		{"names", `["llama-8b", "qwen-32b"]`, []string{"llama-8b", "qwen-32b"}, false},
		{"objects with a name", `[{"name": "llama-8b", "revision": "abc"}]`, []string{"llama-8b"}, false},
		{"empty", `[]`, []string{}, false},
		{"not an array", `{"name": "x"}`, nil, true},
		{"object without a name", `[{"id": 1}]`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := modelNames(tt.raw)
			if (err != nil) != tt.wantErr || (!tt.wantErr && !reflect.DeepEqual(got, tt.want)) {
				t.Errorf("got %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestGPUPrice(t *testing.T) {
	file := capacity.ReferenceInput()
	file.Fleet.CloudPricePerGPUHour = 2.1
	tests := []struct {
		name     string
		profiles Profiles
		kind     string
		want     float64
		wantErr  error
	}{
		{"the reference workload's L40S", referenceProfiles(), "L40S", 2.5, nil},
		{"as the driver names it", referenceProfiles(), "NVIDIA L40S", 2.5, nil},
		{"a built-in GPU no workload uses", referenceProfiles(), "H100-SXM", capacity.H100SXM.PricePerHour, nil},
		{"the fleet's cloud price", NewProfiles(file), "L40S", 2.1, nil},
		{"a given price wins", referenceProfiles().WithPrice(0), "L40S", 0, nil},
		{"unknown kind", referenceProfiles(), "MI300X", 0, ErrUnknownPrice},
		{"no kind", referenceProfiles(), "", 0, ErrUnknownPrice},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.profiles.GPUPrice(tt.kind)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("got %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestCatalogName(t *testing.T) {
	c := NewCatalog()
	c.Add("house-7b", "acme/House-7B")
	tests := []struct{ in, want string }{
		{"llama-8b", "llama-8b"},
		{"meta-llama/Llama-3.1-8B-Instruct", "llama-8b"},
		{"acme/House-7B", "house-7b"},
		{"unknown/model", "unknown/model"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := c.Name(tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"2026-03-02", week.From, false},
		{"2026-03-02T06:30", hour(6.5), false},
		{"2026-03-02T07:30:00+01:00", hour(6.5), false},
		{"last week", time.Time{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTime(tt.in)
			if (err != nil) != tt.wantErr || !got.Equal(tt.want) {
				t.Errorf("got %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
