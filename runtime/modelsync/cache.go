package modelsync

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrLink means a symbolic link (or something swapped in for the file
// that was looked at) sits where modelsync expects its own folder or
// file inside the cache. Nothing there is followed: the cache folder is
// shared by every pod on the node, and a link planted in it must not
// lead a copy to write, or to read as a model file, anything else.
var ErrLink = errors.New("a symbolic link inside the model cache; modelsync does not follow links there")

// dirPerm is the mode of the folders modelsync makes, as before.
const dirPerm = 0o755

// filePerm is the mode of the files modelsync writes.
const filePerm = 0o644

// openCache opens the cache folder as a root, making it when missing.
func openCache(dest string) (*os.Root, error) {
	r, err := os.OpenRoot(dest)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dest, dirPerm); err != nil {
			return nil, fmt.Errorf("modelsync: %w", err)
		}
		r, err = os.OpenRoot(dest)
	}
	if err != nil {
		return nil, fmt.Errorf("modelsync: %w", err)
	}
	return r, nil
}

// openDir opens the folder at the slash-separated path rel under r, one
// segment at a time, making missing folders when create is set. A link,
// or a folder swapped between looking and opening, is refused at any
// step. The caller closes the returned root.
func openDir(r *os.Root, rel string, create bool) (*os.Root, error) {
	cur, err := r.OpenRoot(".")
	if err != nil {
		return nil, fmt.Errorf("modelsync: %w", err)
	}
	for seg := range strings.SplitSeq(rel, "/") {
		next, err := openChild(cur, seg, create)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// openChild opens the folder name directly in r; see openDir.
func openChild(r *os.Root, name string, create bool) (*os.Root, error) {
	fi, err := r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := r.Mkdir(name, dirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("modelsync: %w", err)
		}
		fi, err = r.Lstat(name)
	}
	if err != nil {
		return nil, fmt.Errorf("modelsync: %w", err)
	}
	where := filepath.Join(r.Name(), name)
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("modelsync: %s: %w", where, ErrLink)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("modelsync: %s is not a folder", where)
	}
	child, err := r.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("modelsync: %w", err)
	}
	if st, err := child.Stat("."); err != nil || !os.SameFile(fi, st) {
		child.Close()
		return nil, fmt.Errorf("modelsync: %s changed while opened: %w", where, ErrLink)
	}
	return child, nil
}

// openFile opens the regular file name directly in r with flag, never
// through a link: a missing file is made with O_EXCL (which never
// follows one), and an existing one must be a regular file and the very
// file that was looked at. flag must not hold O_TRUNC or O_EXCL.
//
// Two syncs may both find the file missing and both create it (the
// revision's lock file, which every sync of the revision opens): the one
// whose O_EXCL loses then opens the file the other made, as an existing
// one.
func openFile(r *os.Root, name string, flag int) (*os.File, error) {
	where := filepath.Join(r.Name(), name)
	fi, err := r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) && flag&os.O_CREATE != 0 {
		f, cerr := r.OpenFile(name, flag|os.O_EXCL, filePerm)
		if cerr == nil {
			return f, nil
		}
		if !errors.Is(cerr, fs.ErrExist) {
			return nil, fmt.Errorf("modelsync: %w", cerr)
		}
		// Made by another since the Lstat: look at what is there now.
		fi, err = r.Lstat(name)
	}
	if err != nil {
		return nil, fmt.Errorf("modelsync: %w", err)
	}
	if err := regular(where, fi); err != nil {
		return nil, err
	}
	f, err := r.OpenFile(name, flag&^os.O_CREATE, 0)
	if err != nil {
		return nil, fmt.Errorf("modelsync: %w", err)
	}
	if st, err := f.Stat(); err != nil || !os.SameFile(fi, st) {
		f.Close()
		return nil, fmt.Errorf("modelsync: %s changed while opened: %w", where, ErrLink)
	}
	return f, nil
}

// regular refuses anything but a regular file at where.
func regular(where string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("modelsync: %s: %w", where, ErrLink)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("modelsync: %s is not a regular file", where)
	}
	return nil
}
