//go:build !linux && !darwin

package modelsync

import "os"

// tryLock takes no lock here: the model cache lives on Linux nodes, and
// elsewhere concurrent syncs of one revision are not supported.
func tryLock(*os.File) (bool, error) { return true, nil }
