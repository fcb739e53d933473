// Package loadgen drives an OpenAI-compatible chat completions endpoint with
// open-loop arrivals, as real traffic arrives: requests start on a Poisson
// schedule whatever the server's answers, so a slow server meets a growing
// backlog instead of a politely waiting client (a closed loop would hide
// its latency). Each request is streamed and timed: time to first token
// (from sending the request to the first content chunk) and every gap
// between content chunks.
//
// Several targets can share one run: each arrival goes to the next target
// in turn, so every target sees the same engine state and the same machine
// load, and the difference between their latencies is the difference
// between the paths, not between moments. The platform's overhead benchmark
// (BenchmarkPlatformOverhead) runs a direct path, one bare reverse proxy,
// two chained (the floor of a path with two relays) and the full platform
// this way in one run, as the mission asks.
//
// Goals holds the performance goals the benchmarks' ratios are judged by;
// Summarize, behind `make bench`, ends the benchmarks' output with one
// line per goal, met or missed.
package loadgen
