// Package deptest holds the rules on which of our packages may import
// which, checked against the real import graph (`go list -deps`) by this
// package's test, so the rules hold themselves instead of living in prose:
//
//   - Layers: every package of the module sits in one layer and imports
//     only packages of lower layers. A new package fails the test until it
//     is given a layer.
//   - Test harnesses (testenv, kubetest, platformtest, …) are imported by
//     tests and by other harnesses, never by a package that ships.
//   - Per binary, modules it must never link: the node agent, which runs
//     on machines outside our network, links no database or Redis client.
//   - One clock: no package that ships under runtime/ (the binaries
//     aside) declares a func() time.Time field, variable or parameter;
//     time comes from a k8s.io/utils/clock clock, so a fake drives tests.
//     This rule reads the source (go/parser), not the import graph.
//
// The package has no code: only doc.go and the test.
package deptest
