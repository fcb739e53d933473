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
	"k8s.io/utils/clock"
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
	// KeepRevisions is how many revisions of the model the cache keeps at
	// least, counting this one, the most recently used first; zero means
	// DefaultKeepRevisions.
	KeepRevisions int
	// KeepUnused keeps every revision of the model used within it; zero
	// means DefaultKeepUnused.
	KeepUnused time.Duration
	// Clock stamps uses and the manifest and paces the progress log and
	// the lock polls; nil means the real clock.
	Clock clock.WithTicker
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
	// Removed lists the model's other revisions removed from the cache
	// after the sync.
	Removed []string
}

// Sync copies the revision unless its marker is already there, stamps it
// used, then removes the model's other revisions the node no longer needs
// (see clean).
func Sync(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	cfg.fillDefaults()
	res := Result{Dir: filepath.Join(cfg.Dest, cfg.Model, cfg.Revision)}
	cache, err := openCache(cfg.Dest)
	if err != nil {
		return res, err
	}
	defer cache.Close()
	if err := syncRevision(ctx, cfg, cache, &res); err != nil {
		return res, err
	}
	res.Removed = clean(cache, cfg)
	return res, nil
}

// fillDefaults sets the zero fields of c to their defaults.
func (c *Config) fillDefaults() {
	if c.Parallel <= 0 {
		c.Parallel = 8
	}
	if c.Progress <= 0 {
		c.Progress = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.KeepRevisions <= 0 {
		c.KeepRevisions = DefaultKeepRevisions
	}
	if c.KeepUnused <= 0 {
		c.KeepUnused = DefaultKeepUnused
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
}

// syncRevision makes cfg's revision whole in the cache and stamps it
// used, under its lock.
func syncRevision(ctx context.Context, cfg Config, cache *os.Root, res *Result) error {
	revPath := cfg.Model + "/" + cfg.Revision
	if rev, err := openDir(cache, revPath, false); err == nil {
		ok, err := useSynced(ctx, cfg, cache, rev, res)
		rev.Close()
		if ok || err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	objs, err := list(ctx, cfg)
	if err != nil {
		return err
	}
	for range maxReopens {
		err := copyRevision(ctx, cfg, cache, objs, res)
		if !errors.Is(err, errMoved) {
			return err
		}
		cfg.Logger.Info("the revision's folder was removed while waiting for its lock; making it again", "dir", res.Dir)
	}
	return errMoved
}

// useSynced reports whether rev holds cfg's revision whole and, when it
// does, stamps it used under its lock, so that no clean removes it from
// under the pod starting on it.
func useSynced(ctx context.Context, cfg Config, cache, rev *os.Root, res *Result) (bool, error) {
	if ok, err := synced(rev, cfg, res); !ok || err != nil {
		return false, err
	}
	lock, err := lockRevision(ctx, rev, cfg.Clock, cfg.Logger, res.Dir)
	if err != nil {
		return false, err
	}
	defer lock.Close()
	if !stillAt(cache, cfg.Model+"/"+cfg.Revision, rev) {
		*res = Result{Dir: res.Dir}
		return false, nil
	}
	return true, markUsed(rev, cfg.Clock.Now())
}

// copyRevision copies objs into the revision's folder under its lock,
// unless a sync that held the lock before made it whole meanwhile.
func copyRevision(ctx context.Context, cfg Config, cache *os.Root, objs []Object, res *Result) error {
	revPath := cfg.Model + "/" + cfg.Revision
	rev, err := openDir(cache, revPath, true)
	if err != nil {
		return err
	}
	defer rev.Close()
	// One copy of a revision at a time on a node: two replicas of a model
	// scheduled together would otherwise write the same partial files and
	// the same marker. The second waits, then finds the first's marker.
	lock, err := lockRevision(ctx, rev, cfg.Clock, cfg.Logger, res.Dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	if !stillAt(cache, revPath, rev) {
		return errMoved
	}
	if ok, err := synced(rev, cfg, res); err != nil || !ok {
		if err == nil {
			err = copyLocked(ctx, cfg, rev, objs, res)
		}
		if err != nil {
			return err
		}
	}
	return markUsed(rev, cfg.Clock.Now())
}

// copyLocked copies objs into rev and writes the marker; the caller holds
// rev's lock.
func copyLocked(ctx context.Context, cfg Config, rev *os.Root, objs []Object, res *Result) error {
	dir := res.Dir
	res.Files = len(objs)
	for _, o := range objs {
		res.Bytes += o.Size
	}
	if err := roomFor(cfg.Dest, rev, objs); err != nil {
		return err
	}
	cfg.Logger.Info("syncing model revision", "from", "s3://"+cfg.Bucket+"/"+prefix(cfg), "dir", dir,
		"files", res.Files, "bytes", res.Bytes, "parallel", cfg.Parallel)

	var done, fetched atomic.Int64
	var filesDone atomic.Int64
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := cfg.Clock.NewTicker(cfg.Progress)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-ctx.Done():
				return
			case <-t.C():
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
	err := g.Wait()
	close(stopProgress)
	<-progressDone
	res.Fetched = fetched.Load()
	if err != nil {
		return err
	}
	m := Manifest{Bucket: cfg.Bucket, Model: cfg.Model, Revision: cfg.Revision, Objects: objs, SyncedAt: cfg.Clock.Now().UTC()}
	if err := writeMarker(rev, m); err != nil {
		return err
	}
	cfg.Logger.Info("model revision synced", "dir", dir, "files", res.Files, "bytes", res.Bytes, "fetched", res.Fetched)
	return nil
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
