//go:build hoptrace

package hoptrace

import (
	"testing"
	"time"
)

// TestRecorderMarksOnceUnderAliasAndDumps: the first mark of a point
// counts, an aliased id marks its trace key, and a dump read back holds
// what was marked; Reset forgets it all.
func TestRecorderMarksOnceUnderAliasAndDumps(t *testing.T) {
	Reset()
	t.Cleanup(Reset)
	t0 := time.Unix(0, 1000)
	MarkAt("req-cloud-7", ClientSent, t0)
	MarkAt("req-cloud-7", ClientSent, t0.Add(time.Second)) // later: ignored
	Alias("gw-7", []byte(`{"messages":[{"role":"user","content":"req-cloud-7: hello"}]}`))
	MarkAt("gw-7", Admitted, t0.Add(time.Millisecond))
	Mark("", RelayIn) // no key: ignored

	dir := t.TempDir()
	t.Setenv(DirEnv, dir)
	if err := WriteDump(); err != nil {
		t.Fatal(err)
	}
	dumps, err := ReadDumps(dir)
	if err != nil || len(dumps) != 1 {
		t.Fatalf("read %d dumps, %v; want 1", len(dumps), err)
	}
	traces := Merge(dumps...)
	r := traces["req-cloud-7"]
	if len(traces) != 1 || r == nil {
		t.Fatalf("traces %v, want req-cloud-7 only", traces)
	}
	if r[ClientSent] != 1000 || r[Admitted] != 1000+int64(time.Millisecond) {
		t.Errorf("client sent %d, admitted %d; want 1000 and 1000+1ms", r[ClientSent], r[Admitted])
	}
	var tag Tag
	if tag.Set("gw-7"); tag.ID() != "gw-7" {
		t.Errorf("tag holds %q, want gw-7", tag.ID())
	}
	Reset()
	if d := Snapshot(); len(d.Marks) != 0 || len(d.Alias) != 0 {
		t.Errorf("after Reset: %v", d)
	}
}
