package modelsync

// Names and limits the tests of the package's behaviour need.
const (
	MarkerTemp       = markerTemp
	MaxListPages     = maxListPages
	MaxRevisionBytes = maxRevisionBytes
)

// PartialName is partialName.
var PartialName = partialName

// LockName is the revision's lock file.
const LockName = lockName
