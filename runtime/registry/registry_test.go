package registry

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestRegisterGetListForModel(t *testing.T) {
	env := testenv.Redis(t)
	r := newRegistry(t, env.Client(), env.Prefix)
	ctx := context.Background()
	cloud := NodeRecord{
		ID: "vllm-32b-0", Owner: "orch-2", Location: LocationCloud, Version: "0.1.0",
		ServiceURL: "http://vllm-32b-0.vllm-32b.inference.svc:8000",
		Models:     []ModelSlot{{Name: "qwen-32b", ServedName: "Qwen/Qwen2.5-32B-Instruct", MaxNumSeqs: 16, MaxModelLen: 8192, KVCapacityTokens: 90000}},
	}
	before := time.Now()
	e1 := mustRegister(t, r, onPrem("fra-gpu-07", "orch-1", "llama-8b", "llama-70b"))
	e2 := mustRegister(t, r, cloud)
	e3 := mustRegister(t, r, onPrem("ams-gpu-01", "orch-1", "llama-8b"))

	got, err := r.Get(ctx, "vllm-32b-0")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	want := Node{
		ID: cloud.ID, Owner: cloud.Owner, Epoch: e2, Location: LocationCloud, ServiceURL: cloud.ServiceURL,
		GPUs: []GPU{}, Models: cloud.Models, Version: "0.1.0", State: StateActive,
		RegisteredAt: got.RegisteredAt, LastSeen: got.LastSeen,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Get:\n got %+v\nwant %+v", got, want)
	}
	if d := got.RegisteredAt.Sub(before); d < -time.Second || d > 5*time.Second || !got.LastSeen.Equal(got.RegisteredAt) {
		t.Errorf("registered at %v, last seen %v; want both the registration's time, near %v", got.RegisteredAt, got.LastSeen, before)
	}
	if !got.Healthy(time.Now()) {
		t.Errorf("a node just registered is not healthy: %+v", got)
	}

	tests := []struct {
		name   string
		list   func() ([]Node, error)
		wantID []string
		epochs []int64
	}{
		{"list", func() ([]Node, error) { return r.List(ctx) }, []string{"ams-gpu-01", "fra-gpu-07", "vllm-32b-0"}, []int64{e3, e1, e2}},
		{"8b", func() ([]Node, error) { return r.ForModel(ctx, "llama-8b") }, []string{"ams-gpu-01", "fra-gpu-07"}, []int64{e3, e1}},
		{"70b", func() ([]Node, error) { return r.ForModel(ctx, "llama-70b") }, []string{"fra-gpu-07"}, []int64{e1}},
		{"model nobody serves", func() ([]Node, error) { return r.ForModel(ctx, "mistral-7b") }, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, err := tt.list()
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			var epochs []int64
			for _, n := range nodes {
				ids = append(ids, n.ID)
				epochs = append(epochs, n.Epoch)
			}
			if !reflect.DeepEqual(ids, tt.wantID) || !reflect.DeepEqual(epochs, tt.epochs) {
				t.Errorf("got %v %v, want %v %v", ids, epochs, tt.wantID, tt.epochs)
			}
		})
	}
	if _, err := r.Get(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
	}
}

func TestHeartbeatRefreshesTTL(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	r := newRegistry(t, rdb, env.Prefix)
	ctx := context.Background()
	epoch := mustRegister(t, r, onPrem("n1", "orch-1", "llama-8b"))
	first, _ := r.Get(ctx, "n1")

	// Beating every third of the TTL for three TTLs keeps the record.
	for i := range 9 {
		time.Sleep(testTTL / 3)
		ok, err := r.Heartbeat(ctx, "n1", epoch, Heartbeat{QueueDepth: i, Running: 2 * i, KVCacheUsage: 0.5})
		if err != nil || !ok {
			t.Fatalf("beat %d: %v, %v; want accepted", i, ok, err)
		}
	}
	got, err := r.Get(ctx, "n1")
	if err != nil {
		t.Fatalf("Get after 3 TTLs of beats: %v", err)
	}
	if got.QueueDepth != 8 || got.Running != 16 || got.KVCacheUsage != 0.5 || !got.LastSeen.After(first.LastSeen) {
		t.Errorf("got %+v, want the last beat's load and a later LastSeen than %v", got, first.LastSeen)
	}
	if got.RegisteredAt != first.RegisteredAt {
		t.Errorf("RegisteredAt moved from %v to %v", first.RegisteredAt, got.RegisteredAt)
	}
	if pttl := rdb.PTTL(ctx, r.Keys().Node("n1")).Val(); pttl <= 0 || pttl > testTTL {
		t.Errorf("PTTL = %v, want in (0, %v]", pttl, testTTL)
	}

	// Without beats the record is gone after the TTL, and so is the node
	// from List, which also cleans it out of the index.
	time.Sleep(testTTL + testSlack)
	if _, err := r.Get(ctx, "n1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after the TTL = %v, want ErrNotFound", err)
	}
	if nodes, err := r.List(ctx); err != nil || len(nodes) != 0 {
		t.Errorf("List after the TTL = %v, %v; want none", nodes, err)
	}
	if n := rdb.ZCard(ctx, r.Keys().Live()).Val(); n != 0 {
		t.Errorf("nodes:live has %d members after List, want 0", n)
	}
	if ok, err := r.Heartbeat(ctx, "n1", epoch, Heartbeat{}); err != nil || ok {
		t.Errorf("beat of an expired record = %v, %v; want refused", ok, err)
	}
	if _, err := r.Get(ctx, "n1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused beat brought the record back: %v", err)
	}
}

// TestGPUUtilAbsentVersusZero: a node without GPU telemetry has no
// gpu_util field, which is not the same as an idle GPU (0).
func TestGPUUtilAbsentVersusZero(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	r := newRegistry(t, rdb, env.Prefix)
	ctx := context.Background()
	epoch := mustRegister(t, r, onPrem("n1", "orch-1"))
	steps := []struct {
		name string
		gpu  *float64
	}{
		{"absent before any telemetry", nil},
		{"idle GPU is zero", ptr(0.0)},
		{"busy GPU", ptr(0.91)},
		{"telemetry lost again", nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if ok, err := r.Heartbeat(ctx, "n1", epoch, Heartbeat{GPUUtil: st.gpu}); err != nil || !ok {
				t.Fatalf("Heartbeat = %v, %v", ok, err)
			}
			n, err := r.Get(ctx, "n1")
			if err != nil {
				t.Fatal(err)
			}
			stored := rdb.HExists(ctx, r.Keys().Node("n1"), "gpu_util").Val()
			switch {
			case st.gpu == nil && (n.GPUUtil != nil || stored):
				t.Errorf("got GPUUtil %v (field stored: %v), want absent", *n.GPUUtil, stored)
			case st.gpu != nil && (n.GPUUtil == nil || *n.GPUUtil != *st.gpu):
				t.Errorf("got GPUUtil %v, want %v", n.GPUUtil, *st.gpu)
			}
		})
	}
}

func TestHeartbeatReplacesModelsOnlyWhenSent(t *testing.T) {
	env := testenv.Redis(t)
	r := newRegistry(t, env.Client(), env.Prefix)
	ctx := context.Background()
	epoch := mustRegister(t, r, onPrem("n1", "orch-1", "llama-8b"))
	beat := func(hb Heartbeat) []Node {
		t.Helper()
		if ok, err := r.Heartbeat(ctx, "n1", epoch, hb); err != nil || !ok {
			t.Fatalf("Heartbeat = %v, %v", ok, err)
		}
		nodes, err := r.ForModel(ctx, "qwen-32b")
		if err != nil {
			t.Fatal(err)
		}
		return nodes
	}
	if got := beat(Heartbeat{}); len(got) != 0 {
		t.Errorf("after a beat without models: %d nodes serve qwen-32b, want 0", len(got))
	}
	loaded := onPrem("n1", "orch-1", "llama-8b", "qwen-32b").Models
	if got := beat(Heartbeat{Models: loaded}); len(got) != 1 || !reflect.DeepEqual(got[0].Models, loaded) {
		t.Errorf("after load_model: got %+v, want n1 serving %+v", got, loaded)
	}
	if got := beat(Heartbeat{}); len(got) != 1 {
		t.Errorf("a beat without models dropped them: %+v", got)
	}
}

func TestSetStateDraining(t *testing.T) {
	env := testenv.Redis(t)
	r := newRegistry(t, env.Client(), env.Prefix)
	ctx := context.Background()
	epoch := mustRegister(t, r, onPrem("n1", "orch-1", "llama-8b"))
	if ok, err := r.SetState(ctx, "n1", epoch, StateDraining); err != nil || !ok {
		t.Fatalf("SetState = %v, %v", ok, err)
	}
	n, err := r.Get(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if n.State != StateDraining || n.Healthy(time.Now()) {
		t.Errorf("got state %q, healthy %v; want draining and not healthy", n.State, n.Healthy(time.Now()))
	}
	if _, err := r.SetState(ctx, "n1", epoch, "gone"); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("SetState(gone) = %v, want ErrInvalidRecord", err)
	}
}
