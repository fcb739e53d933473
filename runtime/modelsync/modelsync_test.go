package modelsync_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/llmplat/llmplat/runtime/modelsync"
)

const bucket = "models"

// store is an S3-compatible server in the test, with a count of the bytes
// its object reads sent.
type store struct {
	backend *s3mem.Backend
	url     string
	sent    atomic.Int64 // body bytes of GETs on objects
	gets    atomic.Int64
	// cutAfter, when positive, breaks every object body after that many
	// bytes, as a dropped connection would.
	cutAfter atomic.Int64
	// hooks answer requests for their URL path instead of the store: a
	// hostile or broken S3.
	hooks sync.Map // string → http.HandlerFunc
	// lists counts listing requests.
	lists atomic.Int64
	// gate, when set, holds every object GET until it is closed.
	gate atomic.Pointer[chan struct{}]
}

// hook answers requests for path (bucket and key, "/models/m/r/f") with h.
func (s *store) hook(path string, h http.HandlerFunc) { s.hooks.Store(path, h) }

func newStore(t *testing.T) *store {
	t.Helper()
	s := &store{backend: s3mem.New()}
	if err := s.backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	faker := gofakes3.New(s.backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := s.hooks.Load(r.URL.Path); ok {
			h.(http.HandlerFunc)(w, r)
			return
		}
		if r.URL.Query().Get("list-type") != "" {
			s.lists.Add(1)
		}
		if r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "" && strings.Count(strings.Trim(r.URL.Path, "/"), "/") >= 1 {
			if gate := s.gate.Load(); gate != nil {
				select {
				case <-*gate:
				case <-r.Context().Done():
					return
				}
			}
			s.gets.Add(1)
			cw := &countingWriter{ResponseWriter: w, n: &s.sent, limit: s.cutAfter.Load()}
			faker.ServeHTTP(cw, r)
			return
		}
		faker.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// countingWriter counts the body bytes written, and hijacks the
// connection closed once limit is reached.
type countingWriter struct {
	http.ResponseWriter
	n       *atomic.Int64
	limit   int64
	written int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.limit > 0 && w.written+int64(len(p)) > w.limit {
		p = p[:w.limit-w.written]
		n, _ := w.ResponseWriter.Write(p)
		w.written += int64(n)
		w.n.Add(int64(n))
		if f, ok := w.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler) // cut the connection mid-body
	}
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	w.n.Add(int64(n))
	return n, err
}

func (s *store) put(t *testing.T, key string, data []byte) {
	t.Helper()
	if _, err := s.backend.PutObject(bucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

func (s *store) client() *s3.Client {
	return s3.New(s3.Options{BaseEndpoint: aws.String(s.url), UsePathStyle: true, Region: "eu-central-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		// One try: an interrupted copy must fail here, so the next run
		// shows the resume.
		RetryMaxAttempts: 1})
}

// revision uploads a model revision of files and returns their contents.
func revision(t *testing.T, s *store, model, rev string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{
		"config.json":                      []byte(`{"architectures":["LlamaForCausalLM"]}`),
		"tokenizer.json":                   random(t, 300<<10),
		"model-00001-of-00002.safetensors": random(t, 3<<20),
		"model-00002-of-00002.safetensors": random(t, 2<<20),
		"sub/generation_config.json":       []byte(`{"temperature":0.6}`),
	}
	for name, data := range files {
		s.put(t, model+"/"+rev+"/"+name, data)
	}
	s.put(t, model+"/other-rev/config.json", []byte("not this one"))
	return files
}

func random(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func total(files map[string][]byte) (n int64) {
	for _, b := range files {
		n += int64(len(b))
	}
	return n
}

// same fails unless dir holds exactly files.
func same(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: copy differs (%d bytes, %v), want %d bytes", name, len(got), err, len(want))
		}
	}
}

// TestSyncCopiesResumesAndSkips: a first copy is interrupted mid-file; the
// next run finishes it reading less than the whole revision again; a
// second pod on the node then starts without reading anything.
func TestSyncCopiesResumesAndSkips(t *testing.T) {
	s := newStore(t)
	files := revision(t, s, "llama-8b", "rev1")
	dest := t.TempDir()
	cfg := modelsync.Config{S3: s.client(), Bucket: bucket, Model: "llama-8b", Revision: "rev1", Dest: dest, Parallel: 2}

	s.cutAfter.Store(1 << 20)
	if _, err := modelsync.Sync(t.Context(), cfg); err == nil {
		t.Fatal("a copy whose connections were cut succeeded")
	}
	if _, err := os.Stat(filepath.Join(dest, "llama-8b", "rev1", modelsync.MarkerName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the marker exists after an interrupted copy: %v", err)
	}
	// What the first run kept on disk, whole or partial, is what the
	// next must not read again. (The server's own byte count cannot tell:
	// handlers of the first run may still be writing to closed sockets.)
	dir := filepath.Join(dest, "llama-8b", "rev1")
	var kept int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				kept += fi.Size()
			}
		}
		return nil
	})
	if kept == 0 {
		t.Fatal("the interrupted copy kept nothing")
	}

	s.cutAfter.Store(0)
	res, err := modelsync.Sync(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	same(t, dir, files)
	if res.Skipped || res.Files != len(files) || res.Bytes != total(files) {
		t.Errorf("result %+v, want %d files of %d bytes copied", res, len(files), total(files))
	}
	if want := total(files) - kept; res.Fetched != want {
		t.Errorf("the resumed copy read %d bytes of %d; want %d: all but the %d the first run kept", res.Fetched, total(files), want, kept)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json.partial")); err == nil {
		t.Error("a partial file is left")
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "*.partial"))
	if len(leftovers) > 0 {
		t.Errorf("partial files left: %v", leftovers)
	}
	if _, err := os.Stat(filepath.Join(dest, "llama-8b", "other-rev")); !errors.Is(err, os.ErrNotExist) {
		t.Error("another revision was copied")
	}

	gets := s.gets.Load()
	res, err = modelsync.Sync(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Skipped || s.gets.Load() != gets {
		t.Errorf("a synced revision was read again: %+v, %d GETs", res, s.gets.Load()-gets)
	}
}

// TestSyncRefetchesACorruptFile: a file left whole but wrong by an earlier
// run (no marker) is checked against its MD5 and fetched again.
func TestSyncRefetchesACorruptFile(t *testing.T) {
	s := newStore(t)
	files := revision(t, s, "qwen-32b", "main")
	dest := t.TempDir()
	dir := filepath.Join(dest, "qwen-32b", "main")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(files["tokenizer.json"])
	bad[1000] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	good := files["config.json"]
	if err := os.WriteFile(filepath.Join(dir, "config.json"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := modelsync.Sync(t.Context(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "qwen-32b", Revision: "main", Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	same(t, dir, files)
	if want := total(files) - int64(len(good)); res.Fetched != want {
		t.Errorf("fetched %d bytes, want %d: all but the good file already there", res.Fetched, want)
	}
}

// TestSyncRefusals: a revision with no objects, and names that would write
// outside the cache, are clear errors.
func TestSyncRefusals(t *testing.T) {
	s := newStore(t)
	revision(t, s, "llama-8b", "rev1")
	s.put(t, "evil/r/../../../etc/passwd", []byte("x"))
	base := modelsync.Config{S3: s.client(), Bucket: bucket, Model: "llama-8b", Revision: "rev1", Dest: t.TempDir()}
	for _, tc := range []struct {
		name string
		mod  func(*modelsync.Config)
		want string
	}{
		{"empty revision", func(c *modelsync.Config) { c.Revision = "nope" }, "no objects under s3://models/llama-8b/nope/"},
		{"revision with a slash", func(c *modelsync.Config) { c.Revision = "a/b" }, "-revision"},
		{"model dot-dot", func(c *modelsync.Config) { c.Model = ".." }, "-model"},
		{"no bucket", func(c *modelsync.Config) { c.Bucket = "" }, "-bucket"},
		{"key escaping the folder", func(c *modelsync.Config) { c.Model, c.Revision = "evil", "r" }, "inside the revision's folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mod(&cfg)
			_, err := modelsync.Sync(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
