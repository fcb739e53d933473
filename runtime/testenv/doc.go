// Package testenv gives tests real PostgreSQL and Redis servers.
//
// Each test process starts at most one PostgreSQL server and one Redis
// server, on free loopback ports, the first time a test asks for one.
// Every test then gets its own PostgreSQL database (created for the test and
// dropped when it ends) and its own Redis key prefix (whose keys are deleted
// when it ends), so tests may run in parallel without seeing each other's
// data.
//
// A package whose tests use this harness calls Main from its TestMain, which
// stops the servers once the tests have run:
//
//	func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }
//
// MainWithLeakCheck stops the servers before it looks for leaked goroutines,
// so it replaces goleak.VerifyTestMain; Main is the variant without the check.
//
// LLMPLAT_TEST_DATABASE_URL and LLMPLAT_TEST_REDIS_URL point the harness at
// servers that are already running instead of starting its own; tests still
// get a private database and a private key prefix on them.
//
// When a server cannot be had (its binaries are not installed), a test is
// skipped with a message saying what to install, except under CI=true, where
// it fails with that message: a CI run must never pass by skipping.
//
// Servers live in directories under os.TempDir(). Creating a database
// creates a few hundred files there, so it costs about 10 ms when TMPDIR is a
// RAM-backed file system (tmpfs) and 100-250 ms on a disk, where starting
// PostgreSQL (initdb included) also takes about 1.4 s instead of 0.5 s.
//
// Servers die with the test process (they get a parent-death signal on
// Linux), and each server's temporary directory records the pid of the
// process that owns it, so a harness that starts later stops and removes the
// instances whose owner is gone.
package testenv
