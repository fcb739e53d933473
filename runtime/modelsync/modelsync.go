package modelsync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"
)

// ErrNoSpace means the revision needs more bytes than the cache's disk
// has free.
var ErrNoSpace = errors.New("modelsync: not enough free disk space for the revision")

// API is the part of the S3 client modelsync uses.
type API interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Config says what to copy where.
type Config struct {
	S3       API
	Bucket   string
	Model    string
	Revision string
	// Dest is the cache root: the revision lands in Dest/Model/Revision.
	Dest string
	// Parallel is how many files are copied at once; zero means 8.
	Parallel int
	// Progress is how often progress is logged; zero means 10 s.
	Progress time.Duration
	Logger   *slog.Logger
}

// Object is one file of a revision, as listed.
type Object struct {
	Path string `json:"path"` // relative to the revision
	Size int64  `json:"size"`
	ETag string `json:"etag"`
}

// Manifest is the marker's content.
type Manifest struct {
	Bucket   string    `json:"bucket"`
	Model    string    `json:"model"`
	Revision string    `json:"revision"`
	Objects  []Object  `json:"objects"`
	SyncedAt time.Time `json:"synced_at"`
}

// Result says what a Sync did.
type Result struct {
	Dir string
	// Skipped means the marker was there: nothing was read from S3.
	Skipped bool
	Files   int
	Bytes   int64 // the revision's size
	// Fetched is what was read from S3 this time; less than Bytes after
	// a resumed copy.
	Fetched int64
}

// Sync copies the revision unless its marker is already there.
func Sync(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	if cfg.Progress <= 0 {
		cfg.Progress = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(cfg.Dest, cfg.Model, cfg.Revision)
	res := Result{Dir: dir}
	cache, err := openCache(cfg.Dest)
	if err != nil {
		return res, err
	}
	defer cache.Close()
	revPath := cfg.Model + "/" + cfg.Revision
	if rev, err := openDir(cache, revPath, false); err == nil {
		ok, err := synced(rev, cfg, &res)
		rev.Close()
		if ok || err != nil {
			return res, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return res, err
	}
	objs, err := list(ctx, cfg)
	if err != nil {
		return res, err
	}
	rev, err := openDir(cache, revPath, true)
	if err != nil {
		return res, err
	}
	defer rev.Close()
	// One copy of a revision at a time on a node: two replicas of a model
	// scheduled together would otherwise write the same partial files and
	// the same marker. The second waits, then finds the first's marker.
	lock, err := lockRevision(ctx, rev, cfg.Logger, dir)
	if err != nil {
		return res, err
	}
	defer lock.Close()
	if ok, err := synced(rev, cfg, &res); ok || err != nil {
		return res, err
	}
	res.Files = len(objs)
	for _, o := range objs {
		res.Bytes += o.Size
	}
	if err := roomFor(cfg.Dest, rev, objs); err != nil {
		return res, err
	}
	cfg.Logger.Info("syncing model revision", "from", "s3://"+cfg.Bucket+"/"+prefix(cfg), "dir", dir,
		"files", res.Files, "bytes", res.Bytes, "parallel", cfg.Parallel)

	var done, fetched atomic.Int64
	var filesDone atomic.Int64
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(cfg.Progress)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				cfg.Logger.Info("model sync progress", "files_done", filesDone.Load(), "files", res.Files,
					"bytes_done", done.Load(), "bytes", res.Bytes, "percent", percent(done.Load(), res.Bytes))
			}
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Parallel)
	for _, o := range objs {
		g.Go(func() error {
			n, err := syncFile(gctx, cfg, rev, o, &done)
			fetched.Add(n)
			if err == nil {
				filesDone.Add(1)
			}
			return err
		})
	}
	err = g.Wait()
	close(stopProgress)
	<-progressDone
	res.Fetched = fetched.Load()
	if err != nil {
		return res, err
	}
	m := Manifest{Bucket: cfg.Bucket, Model: cfg.Model, Revision: cfg.Revision, Objects: objs, SyncedAt: time.Now().UTC()}
	if err := writeMarker(rev, m); err != nil {
		return res, err
	}
	cfg.Logger.Info("model revision synced", "dir", dir, "files", res.Files, "bytes", res.Bytes, "fetched", res.Fetched)
	return res, nil
}

// synced reports whether rev holds cfg's revision whole (its marker is
// there, for the same bucket, model and revision), filling res from the
// marker when it does.
func synced(rev *os.Root, cfg Config, res *Result) (bool, error) {
	m, ok, err := readMarker(rev)
	if err != nil || !ok || m.Bucket != cfg.Bucket || m.Model != cfg.Model || m.Revision != cfg.Revision {
		return false, err
	}
	res.Skipped, res.Files, res.Bytes = true, len(m.Objects), 0
	for _, o := range m.Objects {
		res.Bytes += o.Size
	}
	cfg.Logger.Info("model revision already synced", "dir", res.Dir, "files", res.Files, "bytes", res.Bytes)
	return true, nil
}

// validate refuses a config that would read or write outside its place.
func (c Config) validate() error {
	switch {
	case c.S3 == nil:
		return errors.New("modelsync: an S3 client is required")
	case c.Bucket == "":
		return errors.New("modelsync: -bucket is required")
	case c.Dest == "":
		return errors.New("modelsync: -dest is required")
	}
	for _, f := range []struct{ name, v string }{{"model", c.Model}, {"revision", c.Revision}} {
		if f.v == "" || f.v == "." || f.v == ".." || strings.ContainsAny(f.v, "/\\\x00") {
			return fmt.Errorf("modelsync: -%s %q must be one non-empty path segment", f.name, f.v)
		}
	}
	return nil
}

// prefix is the revision's key prefix.
func prefix(c Config) string { return c.Model + "/" + c.Revision + "/" }

// roomFor refuses a revision whose missing bytes, counting what earlier
// runs left in rev, exceed what dest's disk has free.
func roomFor(dest string, rev *os.Root, objs []Object) error {
	free, ok := freeBytes(dest)
	if !ok {
		return nil
	}
	var need int64
	for _, o := range objs {
		have := int64(0)
		if fi, err := rev.Lstat(filepath.FromSlash(o.Path)); err == nil && fi.Mode().IsRegular() && fi.Size() == o.Size {
			have = o.Size
		} else if fi, err := rev.Lstat(filepath.FromSlash(partialName(o.Path, o.ETag))); err == nil && fi.Mode().IsRegular() && fi.Size() <= o.Size {
			have = fi.Size()
		}
		need += o.Size - have
	}
	if need > free {
		return fmt.Errorf("%w: it needs %d more bytes, %s has %d free", ErrNoSpace, need, dest, free)
	}
	return nil
}

// percent is done as a whole percentage of total.
func percent(done, total int64) int64 {
	if total == 0 {
		return 100
	}
	return done * 100 / total
}
