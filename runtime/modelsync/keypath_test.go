package modelsync

import (
	"errors"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzKeyPath: whatever key a listing holds, the path it maps to stays
// inside the revision's folder, is a clean relative path, never takes one
// of modelsync's own names (the marker, its temporary file, a partial
// copy), and leaves room for its partial copy's name.
func FuzzKeyPath(f *testing.F) {
	const pre = "llama-8b/rev1/"
	for _, key := range []string{
		pre + "config.json", pre + "sub/generation_config.json", pre, pre + "sub/",
		pre + "../../etc/passwd", pre + "a/../../b", pre + "/abs", "/" + pre + "x", pre + "a//b", pre + "a/./b",
		pre + "a\\..\\b", pre + "a\x00b", pre + MarkerName, pre + markerTemp, pre + "sub/" + markerTemp,
		pre + "x.partial", pre + "x.0badc0de.partial/y", pre + strings.Repeat("n", 300), pre + strings.Repeat("d/", 600),
		"llama-8b/other/x", pre + "..", pre + ".", pre + "…/ｘ", pre + ".llmplat-", pre + "x.partial/",
	} {
		f.Add(key)
	}
	dir := filepath.Join("cache", "llama-8b", "rev1")
	f.Fuzz(func(t *testing.T, key string) {
		rel, skip, err := relPath(pre, key)
		if err != nil || skip {
			if err != nil && !errors.Is(err, ErrListing) && !errors.Is(err, ErrUnsafeKey) && !errors.Is(err, ErrReservedName) {
				t.Fatalf("relPath(%q): %v is none of the refusals", key, err)
			}
			return
		}
		if pre+rel != key {
			t.Fatalf("relPath(%q) = %q: not the key less its prefix", key, rel)
		}
		native := filepath.FromSlash(rel)
		if !filepath.IsLocal(native) || path.Clean(rel) != rel {
			t.Fatalf("relPath(%q) = %q: not a clean local path", key, rel)
		}
		if full := filepath.Join(dir, native); !strings.HasPrefix(full, dir+string(filepath.Separator)) {
			t.Fatalf("relPath(%q) = %q lands at %q, outside %q", key, rel, full, dir)
		}
		for _, seg := range strings.Split(rel, "/") {
			if seg == MarkerName || seg == markerTemp || reserved(seg) || strings.HasSuffix(seg, partialSuffix) {
				t.Fatalf("relPath(%q) = %q takes modelsync's own name %q", key, rel, seg)
			}
			if p := partialName(seg, "etag"); len(p) > 255 || !reserved(p) {
				t.Fatalf("relPath(%q): the partial copy %q is too long for a file name or takes a key's name", key, p)
			}
		}
		for _, own := range []string{MarkerName, markerTemp} {
			if _, _, err := relPath(pre, pre+own); !errors.Is(err, ErrReservedName) {
				t.Fatalf("a key named %q is not refused: %v", own, err)
			}
		}
	})
}
