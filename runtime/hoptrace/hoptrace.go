// Package hoptrace times a request's first token at every hop between the
// client and the engine and back, across processes, for the benchmarks'
// profile of where a path's added time goes (docs/benchmarks.md).
//
// It records only in a build with the hoptrace tag; in any other build On
// is false, every call site is written as `if hoptrace.On { ... }`, and
// the compiler drops them. A traced request carries its trace key in its
// body as the loadgen writes it, "req-<target>-<n>"; a process that knows
// the request by another id aliases that id to the key (Alias). Each
// process keeps its marks in memory; child processes write them to the
// directory DirEnv names when they end (WriteDump), and the benchmark
// merges every process's marks by key (Merge) and prints a table of the
// gaps between consecutive points (Table).
package hoptrace

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// DirEnv names the environment variable that gives child processes the
// directory for their dumps.
const DirEnv = "LLMPLAT_HOPTRACE_DIR"

// Point is a place on a request's way, in the order a request passes
// them; a path passes some of them.
type Point uint8

// The points, in path order. A relay is a process that passes the request
// and its first token on: the bare proxy, or the gateway's process (the
// gateway and the orchestrator).
const (
	ClientSent      Point = iota // the client sends the request
	RelayIn                      // a relay's handler starts on it
	Admitted                     // the gateway has read, checked and admitted it
	AssignWritten                // the orchestrator wrote its assign to the node's socket
	AssignRead                   // the node agent read the assign
	EngineSent                   // the agent, or the orchestrator for a cloud node, starts its request to the engine
	EngineIn                     // the engine has the request
	EngineFirst                  // the engine writes the first token
	EngineFirstRead              // the agent, or the orchestrator for a cloud node, read the engine's first event
	ChunkWritten                 // the agent's socket writer takes the first token's frame
	ChunkRead                    // the orchestrator's socket read loop has that frame
	GatewayFirst                 // the gateway's relay has the first token in hand
	RelayWrote                   // a relay wrote the first token to its client
	ClientFirst                  // the client read the first token
	NumPoints
)

var pointNames = [NumPoints]string{"client sent", "relay in", "admitted", "assign written", "assign read",
	"engine sent", "engine in", "engine first", "engine first read", "chunk written", "chunk read",
	"gateway first", "relay wrote", "client first"}

func (p Point) String() string {
	if p < NumPoints {
		return pointNames[p]
	}
	return fmt.Sprintf("point(%d)", p)
}

// Dump is one process's marks: unix nanoseconds by trace key (0 where a
// point was not marked), and the ids it aliased to keys.
type Dump struct {
	Marks map[string][NumPoints]int64
	Alias map[string]string
}

// WriteDump writes the process's marks to DirEnv's directory, if it is
// set, as one JSON file per process.
func WriteDump() error {
	dir := os.Getenv(DirEnv)
	if dir == "" || !On {
		return nil
	}
	b, err := json.Marshal(Snapshot())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("hops.%d.json", os.Getpid())), b, 0o644)
}

// ReadDumps reads the dumps WriteDump wrote to dir.
func ReadDumps(dir string) ([]Dump, error) {
	files, err := filepath.Glob(filepath.Join(dir, "hops.*.json"))
	if err != nil {
		return nil, err
	}
	dumps := make([]Dump, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d Dump
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		dumps = append(dumps, d)
	}
	return dumps, nil
}

// Merge joins the dumps' marks by trace key, an id's marks under the key
// some dump aliased it to; where two processes marked one point, the
// earlier mark counts.
func Merge(dumps ...Dump) map[string]*[NumPoints]int64 {
	alias := map[string]string{}
	for _, d := range dumps {
		for id, k := range d.Alias {
			alias[id] = k
		}
	}
	out := map[string]*[NumPoints]int64{}
	for _, d := range dumps {
		for id, marks := range d.Marks {
			k := cmp.Or(alias[id], id)
			r := out[k]
			if r == nil {
				r = new([NumPoints]int64)
				out[k] = r
			}
			for p, t := range marks {
				if t != 0 && (r[p] == 0 || t < r[p]) {
					r[p] = t
				}
			}
		}
	}
	return out
}

// Table reports, for the traces whose key starts with prefix and that
// have both ends (ClientSent and ClientFirst), each gap between
// consecutive marked points and the request's and the first token's
// whole ways (client to engine, engine to client), at p50, p90 and p99.
func Table(traces map[string]*[NumPoints]int64, prefix string) string {
	gaps := map[string][]time.Duration{}
	var order []string
	add := func(name string, d time.Duration) {
		if _, ok := gaps[name]; !ok {
			order = append(order, name)
		}
		gaps[name] = append(gaps[name], d)
	}
	n := 0
	keys := make([]string, 0, len(traces))
	for k := range traces {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a gap's first appearance fixes its row: the same rows each run
	var request, firstToken []time.Duration
	for _, k := range keys {
		r := traces[k]
		if !strings.HasPrefix(k, prefix) || r[ClientSent] == 0 || r[ClientFirst] == 0 {
			continue
		}
		n++
		prev := -1
		for p := range NumPoints {
			if r[p] == 0 {
				continue
			}
			if prev >= 0 {
				add(Point(prev).String()+" → "+p.String(), time.Duration(r[p]-r[prev]))
			}
			prev = int(p)
		}
		if r[EngineIn] != 0 && r[EngineFirst] != 0 {
			request = append(request, time.Duration(r[EngineIn]-r[ClientSent]))
			firstToken = append(firstToken, time.Duration(r[ClientFirst]-r[EngineFirst]))
		}
	}
	// The whole ways come after every gap.
	for _, d := range request {
		add("request: client → engine", d)
	}
	for _, d := range firstToken {
		add("first token: engine → client", d)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d requests traced end to end (ms)\n", strings.TrimSuffix(prefix, "-"), n)
	for _, g := range order {
		ds := gaps[g]
		slices.Sort(ds)
		fmt.Fprintf(&b, "  %-40s p50 %7.3f  p90 %7.3f  p99 %7.3f  (%d)\n", g,
			ms(quantile(ds, .5)), ms(quantile(ds, .9)), ms(quantile(ds, .99)), len(ds))
	}
	return b.String()
}

// quantile returns the q quantile of sorted ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
