package modelsync

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// partialSuffix ends a file still being copied.
const partialSuffix = ".partial"

// partialExtraLen is what a partial copy's name adds to its file's:
// a dot, the 8-hex-digit ETag tag and partialSuffix.
const partialExtraLen = 1 + 8 + len(partialSuffix)

// ErrTooLarge means S3 announced or sent more bytes for an object than
// its listing said it has.
var ErrTooLarge = errors.New("more bytes than the object's listed size")

// partialName is the partial copy of the file name. It is named for the
// object's ETag, so a revision re-uploaded in between never continues an
// old object's bytes.
func partialName(name, etag string) string {
	s := md5.Sum([]byte(etag))
	return name + "." + hex.EncodeToString(s[:4]) + partialSuffix
}

// syncFile brings one object to rev/o.Path and returns the bytes it read
// from S3. A complete file already there is checked, not fetched; a
// partial one is continued from its end.
func syncFile(ctx context.Context, cfg Config, rev *os.Root, o Object, done *atomic.Int64) (int64, error) {
	d := rev
	folder, name := path.Split(o.Path)
	if folder != "" {
		var err error
		if d, err = openDir(rev, strings.TrimSuffix(folder, "/"), true); err != nil {
			return 0, err
		}
		defer d.Close()
	}
	ok, err := keep(cfg, d, name, o)
	if err != nil {
		return 0, err
	}
	if ok {
		done.Add(o.Size)
		return 0, nil
	}
	part := partialName(name, o.ETag)
	f, err := openFile(d, part, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// What is there was read from the same object (If-Match below refuses
	// a changed one): hash it, then fetch the rest. More than the object
	// holds cannot be its start.
	sum := md5.New()
	have, err := io.Copy(sum, io.LimitReader(f, o.Size+1))
	if err != nil {
		return 0, fmt.Errorf("modelsync: read %s: %w", part, err)
	}
	if have > o.Size {
		if err := f.Truncate(0); err != nil {
			return 0, fmt.Errorf("modelsync: %w", err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return 0, fmt.Errorf("modelsync: %w", err)
		}
		sum.Reset()
		have = 0
	}
	done.Add(have)
	var fetched int64
	if have < o.Size {
		fetched, err = fetch(ctx, cfg, o, have, io.MultiWriter(f, sum, counter{done}))
		if errors.Is(err, ErrTooLarge) {
			// The server lies about this object: keep nothing of it.
			_ = d.Remove(part)
		}
		if err != nil {
			return fetched, err
		}
	}
	if err := f.Sync(); err != nil {
		return fetched, fmt.Errorf("modelsync: %w", err)
	}
	if err := check(o, have+fetched, sum); err != nil {
		// A bad copy is not kept to be continued.
		_ = d.Remove(part)
		return fetched, err
	}
	if err := f.Close(); err != nil {
		return fetched, fmt.Errorf("modelsync: %w", err)
	}
	// Rename replaces a name, never follows it.
	if err := d.Rename(part, name); err != nil {
		return fetched, fmt.Errorf("modelsync: %w", err)
	}
	return fetched, nil
}

// keep reports whether the file name already in d is the whole object,
// removing it when it has the object's size but not its bytes.
func keep(cfg Config, d *os.Root, name string, o Object) (bool, error) {
	fi, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("modelsync: %w", err)
	}
	if err := regular(filepath.Join(d.Name(), name), fi); err != nil {
		return false, err
	}
	if fi.Size() != o.Size {
		return false, nil // replaced by the copy's rename
	}
	f, err := openFile(d, name, os.O_RDONLY)
	if err != nil {
		return false, err
	}
	err = verify(f, o)
	f.Close()
	if err == nil {
		return true, nil
	}
	cfg.Logger.Warn("model file corrupt, fetching it again", "file", o.Path)
	if err := d.Remove(name); err != nil {
		return false, fmt.Errorf("modelsync: %w", err)
	}
	return false, nil
}

// fetch writes the object's bytes from offset have to w, never more than
// its listed size: a body that announces more is refused before it is
// read, and one that sends more is refused after the listed size, with
// nothing beyond it written.
func fetch(ctx context.Context, cfg Config, o Object, have int64, w io.Writer) (int64, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(cfg.Bucket), Key: aws.String(prefix(cfg) + o.Path),
		ChecksumMode: types.ChecksumModeEnabled}
	if o.ETag != "" {
		in.IfMatch = aws.String(`"` + o.ETag + `"`)
	}
	if have > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", have))
	}
	out, err := cfg.S3.GetObject(ctx, in)
	if err != nil {
		return 0, fmt.Errorf("modelsync: get %s: %w", o.Path, err)
	}
	defer out.Body.Close()
	want := o.Size - have
	if n := aws.ToInt64(out.ContentLength); n > want {
		return 0, fmt.Errorf("modelsync: get %s: S3 announces %d bytes from offset %d, the object is listed at %d: %w", o.Path, n, have, o.Size, ErrTooLarge)
	}
	n, err := io.Copy(w, io.LimitReader(out.Body, want))
	if err != nil {
		return n, fmt.Errorf("modelsync: copy %s: %w", o.Path, err)
	}
	if n < want {
		return n, nil // short: check says so, the partial copy is kept to be continued
	}
	// Reading on to the end lets the SDK check the body's checksum.
	var one [1]byte
	switch k, err := io.ReadFull(out.Body, one[:]); {
	case k > 0:
		return n, fmt.Errorf("modelsync: copy %s: S3 sent more than the %d bytes listed: %w", o.Path, o.Size, ErrTooLarge)
	case !errors.Is(err, io.EOF):
		return n, fmt.Errorf("modelsync: copy %s: %w", o.Path, err)
	}
	return n, nil
}

// check compares a copy's size and MD5 with the object's.
func check(o Object, size int64, sum hash.Hash) error {
	if size != o.Size {
		return fmt.Errorf("modelsync: %s: copied %d bytes, the object has %d", o.Path, size, o.Size)
	}
	// A multipart upload's ETag is not the MD5 of the whole object; a
	// single part's is.
	if md5ETag(o.ETag) {
		if got := hex.EncodeToString(sum.Sum(nil)); got != strings.ToLower(o.ETag) {
			return fmt.Errorf("modelsync: %s: MD5 %s, the object's ETag %s", o.Path, got, o.ETag)
		}
	}
	return nil
}

// verify checks a file already in place.
func verify(f *os.File, o Object) error {
	sum := md5.New()
	n, err := io.Copy(sum, io.LimitReader(f, o.Size+1))
	if err != nil {
		return err
	}
	return check(o, n, sum)
}

// md5ETag reports whether an ETag is a plain MD5.
func md5ETag(etag string) bool {
	if len(etag) != 32 {
		return false
	}
	_, err := hex.DecodeString(etag)
	return err == nil
}

// counter adds what passes through it to n.
type counter struct{ n *atomic.Int64 }

func (c counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}
