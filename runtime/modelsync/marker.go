package modelsync

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// MarkerName is the completion marker in a synced revision's folder. It
// holds the manifest of what was copied and is written last.
const MarkerName = reservedPrefix + "synced"

// markerTemp is the marker while it is written. Like the marker it starts
// with reservedPrefix, which no key may map to, so no object can share
// its name.
const markerTemp = MarkerName + ".tmp"

// maxMarkerBytes bounds the marker read: a manifest of maxObjects keys
// of maxKeyLen bytes is under 24 MiB.
const maxMarkerBytes = 32 << 20

// readMarker reads rev's marker. A missing, oversized or unreadable one is
// no marker; one that is a link is an error.
func readMarker(rev *os.Root) (Manifest, bool, error) {
	f, err := openFile(rev, MarkerName, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, false, nil
	}
	if err != nil {
		return Manifest{}, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMarkerBytes+1))
	if err != nil || len(b) > maxMarkerBytes {
		return Manifest{}, false, nil
	}
	var m Manifest
	if json.Unmarshal(b, &m) != nil {
		return Manifest{}, false, nil
	}
	return m, true, nil
}

// writeMarker writes rev's marker atomically, after everything else.
func writeMarker(rev *os.Root, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("modelsync: %w", err)
	}
	// A temporary file left by a crash, or a link put in its place, is
	// removed (Remove unlinks a name, never follows it); then O_EXCL makes
	// a new file and never follows a link either.
	if err := rev.Remove(markerTemp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("modelsync: %w", err)
	}
	f, err := rev.OpenFile(markerTemp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return fmt.Errorf("modelsync: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("modelsync: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("modelsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("modelsync: %w", err)
	}
	if err := rev.Rename(markerTemp, MarkerName); err != nil {
		return fmt.Errorf("modelsync: %w", err)
	}
	return nil
}
