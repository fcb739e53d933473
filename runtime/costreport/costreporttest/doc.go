// Package costreporttest writes the cost report's fixture week into a
// migrated database, for the tests of costreport and of the llmplat report
// command. The week and what it holds are described on Week; the engines'
// /metrics snapshots of the same week are costreport's
// testdata/metrics_start.prom and testdata/metrics_end.prom.
package costreporttest
