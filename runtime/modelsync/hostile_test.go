package modelsync_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/modelsync"
)

// handlerWait bounds how long a test waits for a hostile handler to see
// its connection closed: a generous deadline, not a speed assumption.
const handlerWait = 60 * time.Second

// etag is the ETag the test store gives data.
func etag(data []byte) string {
	s := md5.Sum(data)
	return hex.EncodeToString(s[:])
}

// TestSyncBoundsACopyByTheListedSize: an object listed at 10 bytes whose
// GET streams 200 MB, announced or not, is refused with at most 10 bytes
// ever on disk, and its partial copy is removed.
func TestSyncBoundsACopyByTheListedSize(t *testing.T) {
	const stream = 200 << 20
	for _, tc := range []struct {
		name     string
		announce bool
	}{
		{"length announced", true},
		{"length not announced", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			data := []byte("0123456789")
			s.put(t, "m/r/config.json", data)
			dest := t.TempDir()
			dir := filepath.Join(dest, "m", "r")
			var sent, onDisk atomic.Int64
			handled := make(chan struct{})
			s.hook("/"+bucket+"/m/r/config.json", func(w http.ResponseWriter, r *http.Request) {
				defer close(handled)
				w.Header().Set("ETag", `"`+etag(data)+`"`)
				if tc.announce {
					w.Header().Set("Content-Length", strconv.Itoa(stream))
				}
				chunk := bytes.Repeat([]byte("A"), 64<<10)
				for sent.Load() < stream {
					n, err := w.Write(chunk)
					sent.Add(int64(n))
					if err != nil {
						return
					}
					w.(http.Flusher).Flush()
					// What the copy has written so far: a lower bound of
					// the most it ever held, enough to see an unbounded copy.
					parts, _ := filepath.Glob(filepath.Join(dir, "*.partial"))
					for _, p := range parts {
						if fi, err := os.Stat(p); err == nil && fi.Size() > onDisk.Load() {
							onDisk.Store(fi.Size())
						}
					}
				}
			})
			_, err := modelsync.Sync(t.Context(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "m", Revision: "r", Dest: dest})
			t.Logf("refused: %v", err)
			if !errors.Is(err, modelsync.ErrTooLarge) {
				t.Errorf("err = %v, want ErrTooLarge", err)
			}
			select {
			case <-handled:
			case <-time.After(handlerWait):
				t.Fatal("the server is still streaming: the copy never hung up")
			}
			t.Logf("server sent %d bytes; at most %d seen on disk", sent.Load(), onDisk.Load())
			if got := onDisk.Load(); got > int64(len(data)) {
				t.Errorf("%d bytes were on disk, the object is listed at %d", got, len(data))
			}
			if got := sent.Load(); got >= stream {
				t.Errorf("the server streamed all %d bytes: the copy read them", got)
			}
			// The lock stays: it is how the next sync of the revision waits.
			entries, _ := os.ReadDir(dir)
			var left []string
			for _, e := range entries {
				if e.Name() != modelsync.LockName {
					left = append(left, e.Name())
				}
			}
			if len(left) > 0 {
				t.Errorf("files left in the revision's folder: %v", left)
			}
		})
	}
}

// TestSyncRefusesLinksInTheCache: links planted in the cache folder never
// lead the copy to write (or to read as a model file) anything outside.
func TestSyncRefusesLinksInTheCache(t *testing.T) {
	s := newStore(t)
	files := revision(t, s, "llama-8b", "rev1")
	const precious = "precious, outside the cache"
	for _, tc := range []struct {
		name string
		// plant puts a link in the cache (dir is the revision's folder)
		// to the file outFile or the folder outDir outside it.
		plant func(t *testing.T, dest, dir, outFile, outDir string)
		want  error // nil: the link is replaced, not followed
	}{
		{"partial copy", func(t *testing.T, _, dir, outFile, _ string) {
			link(t, outFile, filepath.Join(dir, modelsync.PartialName("config.json", etag(files["config.json"]))))
		}, modelsync.ErrLink},
		{"marker's temporary file", func(t *testing.T, _, dir, outFile, _ string) {
			link(t, outFile, filepath.Join(dir, modelsync.MarkerTemp))
		}, nil},
		{"marker", func(t *testing.T, _, dir, outFile, _ string) {
			link(t, outFile, filepath.Join(dir, modelsync.MarkerName))
		}, modelsync.ErrLink},
		{"lock", func(t *testing.T, _, dir, outFile, _ string) {
			link(t, outFile, filepath.Join(dir, modelsync.LockName))
		}, modelsync.ErrLink},
		{"file with the object's bytes", func(t *testing.T, _, dir, outFile, _ string) {
			if err := os.WriteFile(outFile, files["config.json"], 0o644); err != nil {
				t.Fatal(err)
			}
			link(t, outFile, filepath.Join(dir, "config.json"))
		}, modelsync.ErrLink},
		{"sub-folder", func(t *testing.T, _, dir, _, outDir string) {
			link(t, outDir, filepath.Join(dir, "sub"))
		}, modelsync.ErrLink},
		{"model folder", func(t *testing.T, dest, _, _, outDir string) {
			if err := os.RemoveAll(filepath.Join(dest, "llama-8b")); err != nil {
				t.Fatal(err)
			}
			link(t, outDir, filepath.Join(dest, "llama-8b"))
		}, modelsync.ErrLink},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest, outside := t.TempDir(), t.TempDir()
			dir := filepath.Join(dest, "llama-8b", "rev1")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			outFile, outDir := filepath.Join(outside, "file"), filepath.Join(outside, "dir")
			if err := os.WriteFile(outFile, []byte(precious), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(outDir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.plant(t, dest, dir, outFile, outDir)
			before, _ := os.ReadFile(outFile)

			_, err := modelsync.Sync(t.Context(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "llama-8b", Revision: "rev1", Dest: dest})
			t.Logf("answer: %v", err)
			if tc.want == nil && err != nil {
				t.Fatalf("err = %v, want the link replaced and the copy done", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if got, _ := os.ReadFile(outFile); !bytes.Equal(got, before) {
				t.Errorf("the file outside the cache changed: %q", got)
			}
			if got, _ := os.ReadDir(outDir); len(got) > 0 {
				t.Errorf("files written to the folder outside the cache: %v", got)
			}
			if tc.want == nil {
				same(t, dir, files)
			}
		})
	}
}

func link(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// TestSyncRefusesKeysNamedLikeItsOwnFiles: a key named like the marker's
// temporary file (or the marker, the lock, or a partial copy) is refused loudly,
// never copied and then dropped or overwritten.
func TestSyncRefusesKeysNamedLikeItsOwnFiles(t *testing.T) {
	for _, name := range []string{modelsync.MarkerTemp, modelsync.MarkerName, modelsync.LockName, "config.json.0badc0de.partial", "sub/" + modelsync.MarkerTemp} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			revision(t, s, "llama-8b", "rev1")
			s.put(t, "llama-8b/rev1/"+name, []byte("an object of the revision"))
			dest := t.TempDir()
			_, err := modelsync.Sync(t.Context(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "llama-8b", Revision: "rev1", Dest: dest})
			t.Logf("refused: %v", err)
			if !errors.Is(err, modelsync.ErrReservedName) {
				t.Fatalf("err = %v, want ErrReservedName", err)
			}
			if _, err := os.Stat(filepath.Join(dest, "llama-8b", "rev1", modelsync.MarkerName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the revision is marked synced without the object %q: %v", name, err)
			}
		})
	}
}

// listed is one entry of a crafted listing page.
type listed struct {
	key  string
	size int64
}

// listPage is a ListObjectsV2 answer holding objs.
func listPage(truncated bool, token string, objs ...listed) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>` + bucket + `</Name>`)
	fmt.Fprintf(&b, "<KeyCount>%d</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>%t</IsTruncated>", len(objs), truncated)
	if token != "" {
		b.WriteString("<NextContinuationToken>" + token + "</NextContinuationToken>")
	}
	for _, o := range objs {
		b.WriteString("<Contents><Key>")
		_ = xml.EscapeText(&b, []byte(o.key))
		fmt.Fprintf(&b, `</Key><Size>%d</Size><ETag>"%s"</ETag><StorageClass>STANDARD</StorageClass></Contents>`, o.size, etag([]byte(o.key)))
	}
	b.WriteString("</ListBucketResult>")
	return b.String()
}

// TestSyncRefusesAbsurdListings: the listing pass is bounded in pages,
// keys, key length and sizes, and a listing that cannot be complete is
// refused before anything is fetched.
func TestSyncRefusesAbsurdListings(t *testing.T) {
	one := func(l ...listed) func(int) string { return func(int) string { return listPage(false, "", l...) } }
	for _, tc := range []struct {
		name string
		page func(n int) string // the nth page, from 1
		want error
	}{
		{"endless pages", func(n int) string {
			return listPage(true, fmt.Sprintf("t%d", n), listed{fmt.Sprintf("m/r/f%d", n), 1})
		}, modelsync.ErrListing},
		{"repeated token", func(int) string { return listPage(true, "again", listed{"m/r/f", 1}) }, modelsync.ErrListing},
		{"more without a token", func(int) string { return listPage(true, "", listed{"m/r/f", 1}) }, modelsync.ErrListing},
		{"negative size", one(listed{"m/r/f", -5}), modelsync.ErrListing},
		{"size past the bound", one(listed{"m/r/f", modelsync.MaxRevisionBytes + 1}), modelsync.ErrListing},
		{"sizes that add past the bound", one(listed{"m/r/a", modelsync.MaxRevisionBytes/2 + 1}, listed{"m/r/b", modelsync.MaxRevisionBytes/2 + 1}), modelsync.ErrListing},
		{"sizes that overflow", one(listed{"m/r/a", 1<<63 - 1}, listed{"m/r/b", 1<<63 - 1}), modelsync.ErrListing},
		{"key too long", one(listed{"m/r/" + strings.Repeat("k/", 600), 1}), modelsync.ErrListing},
		{"key outside the prefix", one(listed{"m/other/f", 1}), modelsync.ErrListing},
		{"key listed twice", one(listed{"m/r/f", 1}, listed{"m/r/f", 1}), modelsync.ErrListing},
		{"file and folder", one(listed{"m/r/a", 1}, listed{"m/r/a/b", 1}), modelsync.ErrListing},
		{"more than the disk holds", one(listed{"m/r/f", modelsync.MaxRevisionBytes}), modelsync.ErrNoSpace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := t.TempDir()
			if tc.want == modelsync.ErrNoSpace {
				var st syscall.Statfs_t
				if err := syscall.Statfs(dest, &st); err != nil || uint64(st.Bavail)*uint64(st.Bsize) >= modelsync.MaxRevisionBytes {
					t.Skip("this disk could hold the listing")
				}
			}
			s := newStore(t)
			var pages atomic.Int64
			list := func(w http.ResponseWriter, r *http.Request) {
				n := int(pages.Add(1))
				if n > modelsync.MaxListPages+1 {
					// Past any bound a fixed copy keeps: end an unbounded
					// one so the test fails rather than hangs.
					http.Error(w, "the listing pass is not bounded", http.StatusTeapot)
					return
				}
				w.Header().Set("Content-Type", "application/xml")
				_, _ = w.Write([]byte(tc.page(n)))
			}
			s.hook("/"+bucket, list)
			s.hook("/"+bucket+"/", list)
			_, err := modelsync.Sync(context.Background(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "m", Revision: "r", Dest: dest})
			t.Logf("refused: %v", err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if got := pages.Load(); got > modelsync.MaxListPages {
				t.Errorf("%d pages read, at most %d allowed", got, modelsync.MaxListPages)
			}
			if got := s.gets.Load(); got > 0 {
				t.Errorf("%d objects fetched from a refused listing", got)
			}
		})
	}
}

// TestSyncRefusesAHugeListingPage: a listing page is read up to a bound,
// not into memory whole: a 200 MB key is refused after a few MiB.
// (Under -race the XML decoder reads about 1 MiB in 3 s, far inside the
// page timeout.)
func TestSyncRefusesAHugeListingPage(t *testing.T) {
	const stream = 200 << 20
	s := newStore(t)
	var sent atomic.Int64
	handled := make(chan struct{})
	list := func(w http.ResponseWriter, r *http.Request) {
		defer close(handled)
		w.Header().Set("Content-Type", "application/xml")
		head := `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>` + bucket +
			`</Name><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated><Contents><Key>m/r/`
		if _, err := w.Write([]byte(head)); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("k"), 64<<10)
		for sent.Load() < stream {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		_, _ = w.Write([]byte(`</Key><Size>1</Size></Contents></ListBucketResult>`))
	}
	s.hook("/"+bucket, list)
	s.hook("/"+bucket+"/", list)
	_, err := modelsync.Sync(t.Context(), modelsync.Config{S3: s.client(), Bucket: bucket, Model: "m", Revision: "r", Dest: t.TempDir()})
	t.Logf("refused: %v", err)
	if !errors.Is(err, modelsync.ErrListing) {
		t.Errorf("err = %v, want ErrListing", err)
	}
	select {
	case <-handled:
	case <-time.After(handlerWait):
		t.Fatal("the server is still streaming: the listing never hung up")
	}
	t.Logf("server sent %d bytes of the page", sent.Load())
	if got := sent.Load(); got >= stream {
		t.Errorf("the server streamed all %d bytes of the page: the listing read them", got)
	}
}
