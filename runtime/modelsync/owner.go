package modelsync

import (
	"fmt"
	"os"
)

// Own hands the cache folder dest to uid:gid, making it when missing. It
// is the model pods' first init container, the one step that runs as
// root, with CAP_CHOWN alone: kubelet makes a hostPath folder root:root
// 0755 (type DirectoryOrCreate), a hostPath volume takes no fsGroup, and
// Sync runs as the image's non-root user, which must be able to make the
// model folders in it.
//
// Only dest itself changes owner, never what is in it: a chown that
// walked the cache, shared by every pod on the node, could be led by a
// link planted there to hand anything on the node to that user. Folders
// Sync makes are its user's already. Owning an owned folder changes
// nothing, so every pod may run it.
func Own(dest string, uid, gid int) error {
	if dest == "" {
		return fmt.Errorf("modelsync: -dest is required")
	}
	if uid < 0 || gid < 0 {
		return fmt.Errorf("modelsync: owner %d:%d is not a user and group id", uid, gid)
	}
	if err := os.MkdirAll(dest, dirPerm); err != nil {
		return fmt.Errorf("modelsync: %w", err)
	}
	if err := os.Chown(dest, uid, gid); err != nil {
		return fmt.Errorf("modelsync: own the cache: %w", err)
	}
	return nil
}
