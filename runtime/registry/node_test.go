package registry

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestHealthy(t *testing.T) {
	beat := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		state State
		now   time.Time
		want  bool
	}{
		{"just beat", StateActive, beat, true},
		{"one missed beat", StateActive, beat.Add(6 * time.Second), true},
		{"at two intervals", StateActive, beat.Add(HealthyWithin), true},
		{"two missed beats", StateActive, beat.Add(HealthyWithin + time.Millisecond), false},
		{"draining", StateDraining, beat, false},
		{"replica clock slightly behind redis", StateActive, beat.Add(-5 * time.Millisecond), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := Node{State: tt.state, LastSeen: beat}
			if got := n.Healthy(tt.now); got != tt.want {
				t.Errorf("Healthy(%v) = %v, want %v", tt.now.Sub(beat), got, tt.want)
			}
		})
	}
}

func TestRecordValidate(t *testing.T) {
	cloud := NodeRecord{ID: "vllm-8b-0", Owner: "orch-1", Location: LocationCloud, ServiceURL: "http://vllm-8b-0.vllm-8b.inference.svc:8000"}
	tests := []struct {
		name    string
		rec     NodeRecord
		wantErr error
	}{
		{"on-prem", onPrem("n1", "orch-1", "llama-8b"), nil},
		{"cloud", cloud, nil},
		{"cloud without service url", func() NodeRecord { r := cloud; r.ServiceURL = ""; return r }(), ErrInvalidRecord},
		{"on-prem with service url", func() NodeRecord { r := onPrem("n1", "o"); r.ServiceURL = "http://x"; return r }(), ErrInvalidRecord},
		{"unknown location", func() NodeRecord { r := onPrem("n1", "o"); r.Location = "moon"; return r }(), ErrInvalidRecord},
		{"no owner", onPrem("n1", ""), ErrInvalidName},
		{"id with a brace", onPrem("n{1}", "o"), ErrInvalidName},
		{"model without a name", func() NodeRecord { r := onPrem("n1", "o"); r.Models = []ModelSlot{{}}; return r }(), ErrInvalidName},
		{"negative kv capacity", func() NodeRecord {
			r := onPrem("n1", "o", "m")
			r.Models[0].KVCapacityTokens = -1
			return r
		}(), ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rec.validate()
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("validate() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestHeartbeatValidate(t *testing.T) {
	tests := []struct {
		name string
		hb   Heartbeat
		ok   bool
	}{
		{"typical", Heartbeat{QueueDepth: 3, Running: 28, KVCacheUsage: 0.62, GPUUtil: ptr(0.91)}, true},
		{"no gpu telemetry", Heartbeat{KVCacheUsage: 1}, true},
		{"kv over one", Heartbeat{KVCacheUsage: 1.01}, false},
		{"kv not a number", Heartbeat{KVCacheUsage: math.NaN()}, false},
		{"gpu negative", Heartbeat{GPUUtil: ptr(-0.1)}, false},
		{"negative running", Heartbeat{Running: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.hb.validate()
			if got := err == nil; got != tt.ok {
				t.Fatalf("validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidRecord) {
				t.Errorf("validate() = %v, want ErrInvalidRecord", err)
			}
		})
	}
}

func TestDecodeNode(t *testing.T) {
	good := map[string]string{
		"owner": "orch-1", "epoch": "7", "location": "onprem", "gpus": "[]",
		"models":  `[{"name":"llama-8b","served_name":"s","max_num_seqs":64,"max_model_len":8192,"kv_capacity_tokens":185000}]`,
		"version": "0.1.0", "state": "active", "registered_ms": "1733150000000", "beat_ms": "1733150005000",
	}
	with := func(k, v string) map[string]string {
		h := make(map[string]string, len(good)+1)
		for kk, vv := range good {
			h[kk] = vv
		}
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	tests := []struct {
		name    string
		h       map[string]string
		wantErr error
	}{
		{"good", good, nil},
		{"empty hash", map[string]string{}, ErrNotFound},
		{"epoch missing", with("epoch", ""), ErrCorruptRecord},
		{"epoch not a number", with("epoch", "x"), ErrCorruptRecord},
		{"models not JSON", with("models", "{"), ErrCorruptRecord},
		{"unknown state", with("state", "asleep"), ErrCorruptRecord},
		{"gpu util not a number", with("gpu_util", "high"), ErrCorruptRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := decodeNode("n1", tt.h)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("decodeNode() = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if n.Epoch != 7 || n.LastSeen.UnixMilli() != 1733150005000 || n.GPUUtil != nil || len(n.Models) != 1 {
				t.Errorf("got %+v, want epoch 7, beat 1733150005000, no gpu util, one model", n)
			}
		})
	}
}

func TestSpreadRetry(t *testing.T) {
	const limit = 50
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	tests := []struct {
		name   string
		over   int64
		nowMS  int64
		jitter float64
		want   time.Duration
	}{
		{"first over the limit goes to the next second", 1, 1_000_250, 0, ms(750)},
		{"last of the next second's share", limit, 1_000_250, 0.5, ms(750 + 500)},
		{"next share goes a second later", limit + 1, 1_000_250, 0, ms(1750)},
		{"twentieth share", 19*limit + 1, 1_000_250, 0.25, ms(750 + 19_000 + 250)},
		{"at a second's start waits the whole second", 1, 1_000_000, 0, ms(1000)},
		{"jitter near one stays in the target second", 1, 1_000_250, 0.9999, ms(750 + 999)},
		{"beyond the cap wraps around", 59*limit + 1, 1_000_250, 0, ms(750)},
		{"largest wait stays under the cap", 59 * limit, 1_000_000, 0.9999, ms(1000 + 58_000 + 999)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := spreadRetry(tt.over, limit, tt.nowMS, tt.jitter)
			if got != tt.want {
				t.Errorf("spreadRetry(%d, %d, %d, %v) = %v, want %v", tt.over, limit, tt.nowMS, tt.jitter, got, tt.want)
			}
			if got <= 0 || got > MaxRegistrationRetryAfter {
				t.Errorf("spreadRetry = %v, want in (0, %v]", got, MaxRegistrationRetryAfter)
			}
		})
	}
}
