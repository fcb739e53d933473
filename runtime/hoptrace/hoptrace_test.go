package hoptrace

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMergeJoinsProcessesByKey: marks of one request from three
// processes, one of them under its own id aliased in another process,
// join under the trace key; where two processes marked one point the
// earlier counts.
func TestMergeJoinsProcessesByKey(t *testing.T) {
	var client, gateway, agent Dump
	client.Marks = map[string][NumPoints]int64{"req-platform-1": pointsAt(map[Point]int64{ClientSent: 100, ClientFirst: 900})}
	gateway.Marks = map[string][NumPoints]int64{"req-platform-1": pointsAt(map[Point]int64{RelayIn: 150, Admitted: 200})}
	gateway.Alias = map[string]string{"gw-id": "req-platform-1"}
	agent.Marks = map[string][NumPoints]int64{"gw-id": pointsAt(map[Point]int64{AssignRead: 300, RelayIn: 120})}
	got := Merge(client, gateway, agent)
	if len(got) != 1 {
		t.Fatalf("merged %d traces, want 1: %v", len(got), got)
	}
	r := got["req-platform-1"]
	want := pointsAt(map[Point]int64{ClientSent: 100, RelayIn: 120, Admitted: 200, AssignRead: 300, ClientFirst: 900})
	if r == nil || *r != want {
		t.Fatalf("merged %v, want %v", r, want)
	}
}

// TestTableGapsInPathOrder: each gap between consecutive marked points, the
// request's way and the first token's way, over the traces of one path
// that reached both ends.
func TestTableGapsInPathOrder(t *testing.T) {
	ms := int64(time.Millisecond)
	traces := map[string]*[NumPoints]int64{}
	for i := range 10 {
		r := pointsAt(map[Point]int64{ClientSent: 0, RelayIn: 1 * ms, EngineIn: 2 * ms,
			EngineFirst: 50 * ms, RelayWrote: 51 * ms, ClientFirst: (53 + int64(i)) * ms})
		r[ClientSent] = 1 // 0 means unmarked
		traces["req-proxy-"+string(rune('a'+i))] = &r
	}
	half := pointsAt(map[Point]int64{ClientSent: 1, RelayIn: 5 * ms}) // never reached the client
	traces["req-proxy-z"] = &half
	other := pointsAt(map[Point]int64{ClientSent: 1, EngineIn: 9 * ms, EngineFirst: 60 * ms, ClientFirst: 70 * ms})
	traces["req-direct-1"] = &other

	table := Table(traces, "req-proxy-")
	rows := strings.Split(strings.TrimSpace(table), "\n")
	if !strings.HasPrefix(rows[0], "req-proxy: 10 requests") {
		t.Fatalf("header %q, want 10 proxy requests\n%s", rows[0], table)
	}
	wantRows := []struct{ name, p50 string }{
		{"client sent → relay in", "1.000"},
		{"relay in → engine in", "1.000"},
		{"engine in → engine first", "48.000"},
		{"engine first → relay wrote", "1.000"},
		{"relay wrote → client first", "7.000"}, // 2..11 ms: the sixth smallest
		{"request: client → engine", "2.000"},
		{"first token: engine → client", "8.000"},
	}
	if len(rows) != 1+len(wantRows) {
		t.Fatalf("%d rows, want %d\n%s", len(rows)-1, len(wantRows), table)
	}
	field := regexp.MustCompile(`^\s+(.+?)\s+p50\s+([0-9.]+)\s+p90\s+([0-9.]+)\s+p99\s+([0-9.]+)\s+\((\d+)\)$`)
	for i, w := range wantRows {
		m := field.FindStringSubmatch(rows[i+1])
		if m == nil || m[1] != w.name || m[2] != w.p50 || m[5] != "10" {
			t.Errorf("row %d = %q, want %s with p50 %s over 10", i, rows[i+1], w.name, w.p50)
		}
	}
	if got := field.FindStringSubmatch(rows[5]); got == nil || got[4] != "11.000" {
		t.Errorf("relay wrote → client first p99: row %q, want 11.000", rows[5])
	}
}

func pointsAt(m map[Point]int64) [NumPoints]int64 {
	var r [NumPoints]int64
	for p, t := range m {
		r[p] = t
	}
	return r
}
