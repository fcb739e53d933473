package testenv

import "runtime"

// LiveBytes returns the live heap and goroutine stacks after a full
// collection, and the goroutine count: what a memory benchmark compares
// before and after it opens what it measures.
func LiveBytes() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse, runtime.NumGoroutine()
}
