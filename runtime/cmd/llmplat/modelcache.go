package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/llmplat/llmplat/runtime/modelsync"
)

func init() {
	register("modelcache", "hand the node's model cache folder to modelsync's user (the model pods' root init step)", runModelCache)
}

// runModelCache gives the cache folder dest to the user modelsync runs
// as; see modelsync.Own.
func runModelCache(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("modelcache")
	dest := fs.String("dest", "/models", "the cache folder: the volume modelsync writes to")
	owner := fs.String("owner", "", "uid:gid modelsync runs as (the image's user, 65532:65532)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %v", errUnexpectedArgs, fs.Args())
	}
	uid, gid, err := parseOwner(*owner)
	if err != nil {
		return err
	}
	if err := modelsync.Own(*dest, uid, gid); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "modelcache: %s belongs to %d:%d\n", *dest, uid, gid)
	return nil
}

// parseOwner reads "uid:gid", both numeric.
func parseOwner(s string) (int, int, error) {
	u, g, ok := strings.Cut(s, ":")
	uid, uerr := strconv.ParseUint(u, 10, 31)
	gid, gerr := strconv.ParseUint(g, 10, 31)
	if !ok || uerr != nil || gerr != nil {
		return 0, 0, fmt.Errorf("-owner %q: want numeric uid:gid, such as 65532:65532", s)
	}
	return int(uid), int(gid), nil
}
