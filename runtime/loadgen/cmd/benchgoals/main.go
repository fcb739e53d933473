// Command benchgoals reads go test's benchmark output on stdin, copies it
// to stdout as it comes, and ends with one line per performance goal
// (loadgen.Goals): met or missed. `make bench` pipes its benchmarks
// through it. It exits 1 when the output held a failure, so the
// pipeline's status is the benchmarks'.
package main

import (
	"fmt"
	"os"

	"github.com/llmplat/llmplat/runtime/loadgen"
)

func main() {
	failed, err := loadgen.Summarize(os.Stdin, os.Stdout, loadgen.Goals)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchgoals:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}
