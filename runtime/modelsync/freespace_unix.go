//go:build linux || darwin

package modelsync

import "syscall"

// freeBytes is what an unprivileged writer may still write on dir's file
// system; ok is false when it cannot be told.
func freeBytes(dir string) (n int64, ok bool) {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0, false
	}
	free := uint64(st.Bavail) * uint64(st.Bsize)
	return int64(min(free, 1<<62)), true
}
