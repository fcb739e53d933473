// Package modelsync copies one revision of a model's weights from S3 to
// the node's local disk: the model pods' init container. The copy is
// parallel over files and resumable (a file interrupted mid-way goes on
// from its last byte, and a whole file left by an interrupted run is
// checked rather than fetched again), every file is checked against its
// size and, where S3 has one, its MD5 ETag, and a marker written last
// makes a second pod on the same node start without copying at all.
package modelsync

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"
)

// MarkerName is the completion marker in a synced revision's folder. It
// holds the manifest of what was copied and is written last.
const MarkerName = ".llmplat-synced"

// partialSuffix ends a file still being copied.
const partialSuffix = ".partial"

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
	if m, ok := readMarker(dir); ok && m.Bucket == cfg.Bucket && m.Model == cfg.Model && m.Revision == cfg.Revision {
		res.Skipped, res.Files = true, len(m.Objects)
		for _, o := range m.Objects {
			res.Bytes += o.Size
		}
		cfg.Logger.Info("model revision already synced", "dir", dir, "files", res.Files, "bytes", res.Bytes)
		return res, nil
	}
	objs, err := list(ctx, cfg)
	if err != nil {
		return res, err
	}
	res.Files = len(objs)
	for _, o := range objs {
		res.Bytes += o.Size
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("modelsync: %w", err)
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
			n, err := syncFile(gctx, cfg, dir, o, &done)
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
	if err := writeMarker(dir, m); err != nil {
		return res, err
	}
	cfg.Logger.Info("model revision synced", "dir", dir, "files", res.Files, "bytes", res.Bytes, "fetched", res.Fetched)
	return res, nil
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

// list returns the revision's objects, sorted by path.
func list(ctx context.Context, cfg Config) ([]Object, error) {
	pre := prefix(cfg)
	var objs []Object
	p := s3.NewListObjectsV2Paginator(cfg.S3, &s3.ListObjectsV2Input{Bucket: aws.String(cfg.Bucket), Prefix: aws.String(pre)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("modelsync: list s3://%s/%s: %w", cfg.Bucket, pre, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			rel := strings.TrimPrefix(key, pre)
			if rel == "" || strings.HasSuffix(rel, "/") {
				continue // a folder placeholder
			}
			if !safeRel(rel) {
				return nil, fmt.Errorf("modelsync: object key %q would be written outside the revision's folder", key)
			}
			objs = append(objs, Object{Path: rel, Size: aws.ToInt64(o.Size), ETag: strings.Trim(aws.ToString(o.ETag), `"`)})
		}
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("modelsync: no objects under s3://%s/%s: is the revision uploaded?", cfg.Bucket, pre)
	}
	slices.SortFunc(objs, func(a, b Object) int { return strings.Compare(a.Path, b.Path) })
	return objs, nil
}

// safeRel reports whether rel is a clean relative path that stays inside
// its folder and does not clash with the marker or partial files.
func safeRel(rel string) bool {
	if strings.ContainsAny(rel, "\\\x00") || path.IsAbs(rel) || path.Clean(rel) != rel {
		return false
	}
	for seg := range strings.SplitSeq(rel, "/") {
		if seg == ".." || seg == "." || seg == "" {
			return false
		}
	}
	return rel != MarkerName && !strings.HasSuffix(rel, partialSuffix)
}

// syncFile brings one object to dir/o.Path and returns the bytes it read
// from S3. A complete file already there is checked, not fetched; a
// partial one is continued from its end.
func syncFile(ctx context.Context, cfg Config, dir string, o Object, done *atomic.Int64) (int64, error) {
	final := filepath.Join(dir, filepath.FromSlash(o.Path))
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return 0, fmt.Errorf("modelsync: %w", err)
	}
	if fi, err := os.Stat(final); err == nil && fi.Size() == o.Size {
		if err := verify(final, o); err == nil {
			done.Add(o.Size)
			return 0, nil
		}
		cfg.Logger.Warn("model file corrupt, fetching it again", "file", o.Path)
		if err := os.Remove(final); err != nil {
			return 0, fmt.Errorf("modelsync: %w", err)
		}
	}
	// The partial copy is named for the object's ETag, so a revision
	// re-uploaded in between never continues an old object's bytes.
	part := final + "." + etagTag(o.ETag) + partialSuffix
	f, err := os.OpenFile(part, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return 0, fmt.Errorf("modelsync: %w", err)
	}
	defer f.Close()
	// What is there was read from the same object (If-Match below refuses
	// a changed one): hash it, then fetch the rest.
	sum := md5.New()
	have, err := io.Copy(sum, f)
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
		fetched, err = io.Copy(io.MultiWriter(f, sum, counter{done}), out.Body)
		out.Body.Close()
		if err != nil {
			return fetched, fmt.Errorf("modelsync: copy %s: %w", o.Path, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fetched, fmt.Errorf("modelsync: %w", err)
	}
	if err := check(o, have+fetched, sum); err != nil {
		// A bad copy is not kept to be continued.
		_ = os.Remove(part)
		return fetched, err
	}
	if err := f.Close(); err != nil {
		return fetched, fmt.Errorf("modelsync: %w", err)
	}
	if err := os.Rename(part, final); err != nil {
		return fetched, fmt.Errorf("modelsync: %w", err)
	}
	return fetched, nil
}

// etagTag is a short file-name-safe tag of an ETag.
func etagTag(etag string) string {
	s := md5.Sum([]byte(etag))
	return hex.EncodeToString(s[:4])
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
func verify(file string, o Object) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sum := md5.New()
	n, err := io.Copy(sum, f)
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

// percent is done as a whole percentage of total.
func percent(done, total int64) int64 {
	if total == 0 {
		return 100
	}
	return done * 100 / total
}

// readMarker reads dir's marker.
func readMarker(dir string) (Manifest, bool) {
	b, err := os.ReadFile(filepath.Join(dir, MarkerName))
	if err != nil {
		return Manifest{}, false
	}
	var m Manifest
	if json.Unmarshal(b, &m) != nil {
		return Manifest{}, false
	}
	return m, true
}

// writeMarker writes dir's marker atomically, after everything else.
func writeMarker(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("modelsync: %w", err)
	}
	tmp := filepath.Join(dir, MarkerName+".tmp")
	f, err := os.Create(tmp)
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
	if err := os.Rename(tmp, filepath.Join(dir, MarkerName)); err != nil {
		return fmt.Errorf("modelsync: %w", err)
	}
	return nil
}
