//go:build !hoptrace

package hoptrace

import "testing"

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
