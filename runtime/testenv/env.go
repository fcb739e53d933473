package testenv

import (
	"os"
	"strings"
)

// makeVariables are the variables make sets for the commands it runs: a
// make started with them is a sub-make, which takes its flags and its job
// server from the make above it.
var makeVariables = []string{"MAKEFLAGS=", "MFLAGS=", "MAKELEVEL="}

// CleanEnv is the test's environment without make's own variables, as a
// newcomer's shell has it: a make a test starts (make run, make build, make
// provider-mirror) is then a make of its own, not a sub-make of make test.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !hasAnyPrefix(kv, makeVariables) {
			env = append(env, kv)
		}
	}
	return env
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
