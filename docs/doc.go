// Package docs holds the project's documents. It has no code: only this
// file and the tests that keep two documents true where a claim can be
// checked mechanically. The overview (architecture.md): the migrations'
// range, the Redis keys the code builds, the tests, files, packages and
// declarations it names, its links, and the packages that run without a
// goroutine leak check; its layers table is checked by runtime/deptest,
// beside the layers it mirrors. The benchmarks page (benchmarks.md): every
// benchmark of the module is on it, and every one it names exists.
package docs
