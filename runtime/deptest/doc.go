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
//
// The package has no code: only doc.go and the test.
package deptest
