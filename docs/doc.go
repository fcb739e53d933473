// Package docs holds the project's documents. It has no code: only this
// file and the test that keeps the overview (architecture.md) true where a
// claim can be checked mechanically — the migrations' range, the Redis
// keys the code builds, the tests, files, packages and declarations it
// names, its links, and the packages that run without a goroutine leak
// check. The layers table of the overview is checked by runtime/deptest,
// beside the layers it mirrors.
package docs
