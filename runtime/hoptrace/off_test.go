//go:build !hoptrace

package hoptrace

import (
	"testing"
	"unsafe"
)

// TestOffRecordsNothing: without the tag nothing is kept and no dump is
// written, even with the directory set.
func TestOffRecordsNothing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DirEnv, dir)
	Alias("id", []byte("req-proxy-1"))
	Mark("req-proxy-1", ClientSent)
	if d := Snapshot(); len(d.Marks) != 0 || Key([]byte("req-proxy-1")) != "" {
		t.Errorf("recorded without the tag: %v", d)
	}
	if err := WriteDump(); err != nil {
		t.Fatal(err)
	}
	if dumps, err := ReadDumps(dir); err != nil || len(dumps) != 0 {
		t.Errorf("dumps %v, %v; want none", dumps, err)
	}
}

// TestOffTagTakesNoRoom: a stream's struct carries a Tag; without the tag
// it must cost nothing (an open stream's memory is a measured goal).
func TestOffTagTakesNoRoom(t *testing.T) {
	var tag Tag
	tag.Set("req-proxy-1")
	if size := unsafe.Sizeof(tag); size != 0 || tag.ID() != "" {
		t.Errorf("Tag: %d bytes, id %q; want 0 and none", size, tag.ID())
	}
}
