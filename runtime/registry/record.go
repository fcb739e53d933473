package registry

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The fields of the node:{id} hash.
const (
	fieldOwner        = "owner"
	fieldEpoch        = "epoch"
	fieldLocation     = "location"
	fieldServiceURL   = "service_url" // cloud nodes only
	fieldGPUs         = "gpus"        // JSON array of GPU
	fieldModels       = "models"      // JSON array of ModelSlot
	fieldVersion      = "version"
	fieldState        = "state"
	fieldRegisteredMS = "registered_ms" // Redis time, Unix ms
	fieldBeatMS       = "beat_ms"       // Redis time of the last beat (or registration), Unix ms
	fieldQueueDepth   = "queue_depth"   // absent until the first heartbeat
	fieldRunning      = "running"
	fieldKVCacheUsage = "kv_cache_usage"
	fieldGPUUtil      = "gpu_util"    // absent when the last beat had no GPU telemetry
	fieldEngineDown   = "engine_down" // why the node's engine is down; "" or absent when up
)

// recordFields returns r's static fields as HSET field, value pairs; the
// register script adds epoch, state and the times.
func recordFields(r NodeRecord) ([]any, error) {
	gpus, err := json.Marshal(nonNil(r.GPUs))
	if err != nil {
		return nil, fmt.Errorf("encode gpus: %w", err)
	}
	models, err := json.Marshal(nonNil(r.Models))
	if err != nil {
		return nil, fmt.Errorf("encode models: %w", err)
	}
	f := []any{
		fieldOwner, r.Owner,
		fieldLocation, string(r.Location),
		fieldGPUs, string(gpus),
		fieldModels, string(models),
		fieldVersion, r.Version,
	}
	if r.ServiceURL != "" {
		f = append(f, fieldServiceURL, r.ServiceURL)
	}
	return f, nil
}

// beatFields returns hb's fields as HSET field, value pairs, without
// gpu_util, which the script sets or deletes.
func beatFields(hb Heartbeat) ([]any, error) {
	f := []any{
		fieldQueueDepth, strconv.Itoa(hb.QueueDepth),
		fieldRunning, strconv.Itoa(hb.Running),
		fieldKVCacheUsage, formatFloat(hb.KVCacheUsage),
		fieldEngineDown, hb.EngineDown,
	}
	if hb.Models != nil {
		models, err := json.Marshal(hb.Models)
		if err != nil {
			return nil, fmt.Errorf("encode models: %w", err)
		}
		f = append(f, fieldModels, string(models))
	}
	return f, nil
}

// nonNil returns s, or an empty slice for nil, so a record stores "[]"
// rather than "null".
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// formatFloat writes v with the fewest digits that read back exactly.
func formatFloat(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// decodeNode reads a node:{id} hash; an empty hash is ErrNotFound.
func decodeNode(id string, h map[string]string) (Node, error) {
	if len(h) == 0 {
		return Node{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	d := decoder{h: h}
	n := Node{
		ID:           id,
		Owner:        h[fieldOwner],
		Epoch:        d.int(fieldEpoch, true),
		Location:     Location(h[fieldLocation]),
		ServiceURL:   h[fieldServiceURL],
		Version:      h[fieldVersion],
		State:        State(h[fieldState]),
		RegisteredAt: time.UnixMilli(d.int(fieldRegisteredMS, true)),
		LastSeen:     time.UnixMilli(d.int(fieldBeatMS, true)),
		QueueDepth:   int(d.int(fieldQueueDepth, false)),
		Running:      int(d.int(fieldRunning, false)),
		KVCacheUsage: d.float(fieldKVCacheUsage),
		EngineDown:   h[fieldEngineDown],
	}
	if _, ok := h[fieldGPUUtil]; ok {
		v := d.float(fieldGPUUtil)
		n.GPUUtil = &v
	}
	d.json(fieldGPUs, &n.GPUs)
	d.json(fieldModels, &n.Models)
	if d.err == nil && !n.State.valid() {
		d.err = fmt.Errorf("state %q", n.State)
	}
	if d.err != nil {
		return Node{}, fmt.Errorf("%w %s: %w", ErrCorruptRecord, id, d.err)
	}
	return n, nil
}

// decoder reads typed fields of a hash and keeps the first error.
type decoder struct {
	h   map[string]string
	err error
}

// int reads an integer field; an absent one is 0, or an error if required.
func (d *decoder) int(field string, required bool) int64 {
	s, ok := d.h[field]
	if !ok {
		if required && d.err == nil {
			d.err = fmt.Errorf("field %s missing", field)
		}
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil && d.err == nil {
		d.err = fmt.Errorf("field %s: %w", field, err)
	}
	return v
}

// float reads an optional float field; an absent one is 0.
func (d *decoder) float(field string) float64 {
	s, ok := d.h[field]
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && d.err == nil {
		d.err = fmt.Errorf("field %s: %w", field, err)
	}
	return v
}

// json decodes an optional JSON field into v.
func (d *decoder) json(field string, v any) {
	s, ok := d.h[field]
	if !ok {
		return
	}
	if err := json.Unmarshal([]byte(s), v); err != nil && d.err == nil {
		d.err = fmt.Errorf("field %s: %w", field, err)
	}
}
