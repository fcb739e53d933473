//go:build hoptrace

package hoptrace

import (
	"regexp"
	"sync"
	"time"
)

// On is true in a build with the hoptrace tag: marks are recorded.
const On = true

var (
	mu    sync.Mutex
	marks = map[string]*[NumPoints]int64{}
	alias = map[string]string{}
	keyRE = regexp.MustCompile(`req-[a-z]+-[0-9]+`)
)

// Key returns the trace key in body, or "".
func Key(body []byte) string { return string(keyRE.Find(body)) }

// Now is time.Now, for a point whose key is known only later (MarkAt).
func Now() time.Time { return time.Now() }

// Mark records point p of the request id (a trace key or an aliased id)
// now, unless p was marked already.
func Mark(id string, p Point) { MarkAt(id, p, time.Now()) }

// MarkAt records point p of id at t, unless p was marked already.
func MarkAt(id string, p Point, t time.Time) {
	if id == "" {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	k := id
	if a, ok := alias[id]; ok {
		k = a
	}
	r := marks[k]
	if r == nil {
		r = new([NumPoints]int64)
		marks[k] = r
	}
	if r[p] == 0 {
		r[p] = t.UnixNano()
	}
}

// Alias records that id names the request whose trace key is in body, so
// that Mark(id, …) marks that key.
func Alias(id string, body []byte) {
	k := Key(body)
	if id == "" || k == "" || id == k {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	alias[id] = k
}

// Snapshot returns a copy of this process's marks and aliases.
func Snapshot() Dump {
	mu.Lock()
	defer mu.Unlock()
	d := Dump{Marks: make(map[string][NumPoints]int64, len(marks)), Alias: make(map[string]string, len(alias))}
	for k, r := range marks {
		d.Marks[k] = *r
	}
	for id, k := range alias {
		d.Alias[id] = k
	}
	return d
}

// Reset forgets every mark and alias of this process.
func Reset() {
	mu.Lock()
	defer mu.Unlock()
	clear(marks)
	clear(alias)
}

// Tag holds a request's id in a struct that lives as long as its stream,
// for the points marked later; without the hoptrace tag it is empty and
// takes no room.
type Tag struct{ id string }

// Set keeps id.
func (t *Tag) Set(id string) { t.id = id }

// ID returns the id kept, or "".
func (t *Tag) ID() string { return t.id }
