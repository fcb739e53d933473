package modelsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	// maxListPages bounds the listing pass: S3 sends up to 1,000 keys a
	// page, so a revision of maxObjects files takes 20; more pages is a
	// server looping or trickling keys.
	maxListPages = 1_000
	// maxObjects bounds the keys a listing may hold: the largest open
	// checkpoints have a few hundred files.
	maxObjects = 20_000
	// maxKeyLen is S3's own limit on a key, in bytes.
	maxKeyLen = 1_024
	// maxSegmentLen keeps a path segment short enough that its partial
	// copy's name (partialExtraLen more) still fits a file name (255
	// bytes on Linux file systems).
	maxSegmentLen = 255 - partialExtraLen
	// maxListPageBytes bounds one listing page's body: 1,000 keys of
	// S3's longest (1,024 bytes) with their fields take about 1.4 MiB.
	maxListPageBytes = 4 << 20
	// listPageTimeout bounds the wait for one listing page: S3 answers in
	// well under a second, so two minutes is a server that stalls.
	listPageTimeout = 2 * time.Minute
	// maxRevisionBytes bounds a revision's listed size: four times the
	// largest open checkpoint (a trillion parameters in bf16, 2 TB).
	maxRevisionBytes = 8 << 40
)

// reservedPrefix starts the names modelsync keeps for itself in a
// revision's folder: the marker, its temporary file and the lock. No key
// may map to a segment that starts with it.
const reservedPrefix = ".llmplat-"

var (
	// ErrListing means the S3 listing is one modelsync refuses: too many
	// pages or keys, a key too long or outside the revision's prefix, a
	// negative or absurd size, or a page that says more follows without a
	// new token.
	ErrListing = errors.New("modelsync: listing refused")
	// ErrUnsafeKey means a key is not a clean relative path inside the
	// revision's folder ("..", an absolute path, a backslash, a segment
	// too long for a file name).
	ErrUnsafeKey = errors.New("does not map to a clean file path inside the revision's folder")
	// ErrReservedName means a key maps to a name modelsync keeps for its
	// marker or its partial copies.
	ErrReservedName = errors.New("uses a name modelsync keeps for itself (\"" + reservedPrefix + "*\" or \"*" + partialSuffix + "\")")
)

// list returns the revision's objects, sorted by path, refusing a listing
// whose pages, keys or sizes are absurd.
func list(ctx context.Context, cfg Config) ([]Object, error) {
	pre := prefix(cfg)
	where := "s3://" + cfg.Bucket + "/" + pre
	var objs []Object
	var token *string
	var total int64
	for pages := 1; ; pages++ {
		page, err := listPage(ctx, cfg, pre, token)
		if err != nil {
			return nil, fmt.Errorf("modelsync: list %s: %w", where, err)
		}
		if len(objs)+len(page.Contents) > maxObjects {
			return nil, fmt.Errorf("%w: %s lists more than %d keys", ErrListing, where, maxObjects)
		}
		for _, o := range page.Contents {
			rel, skip, err := relPath(pre, aws.ToString(o.Key))
			if err != nil {
				return nil, err
			}
			if skip {
				continue
			}
			size := aws.ToInt64(o.Size)
			if size < 0 || size > maxRevisionBytes-total {
				return nil, fmt.Errorf("%w: %s: object %q listed at %d bytes, after %d bytes of others (at most %d in all)", ErrListing, where, rel, size, total, int64(maxRevisionBytes))
			}
			total += size
			objs = append(objs, Object{Path: rel, Size: size, ETag: strings.Trim(aws.ToString(o.ETag), `"`)})
		}
		if !aws.ToBool(page.IsTruncated) {
			break
		}
		next := page.NextContinuationToken
		if aws.ToString(next) == "" || (token != nil && *next == *token) {
			return nil, fmt.Errorf("%w: %s: page %d says more follows but gives no new continuation token", ErrListing, where, pages)
		}
		if pages >= maxListPages {
			return nil, fmt.Errorf("%w: %s takes more than %d pages", ErrListing, where, maxListPages)
		}
		token = next
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("modelsync: no objects under %s: is the revision uploaded?", where)
	}
	slices.SortFunc(objs, func(a, b Object) int { return strings.Compare(a.Path, b.Path) })
	if err := distinct(objs); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrListing, where, err)
	}
	return objs, nil
}

// listPage reads one page of the listing, bounded in time and size.
func listPage(ctx context.Context, cfg Config, pre string, token *string) (*s3.ListObjectsV2Output, error) {
	ctx, cancel := context.WithTimeout(ctx, listPageTimeout)
	defer cancel()
	return cfg.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(cfg.Bucket), Prefix: aws.String(pre), ContinuationToken: token},
		func(o *s3.Options) {
			if o.HTTPClient != nil {
				o.HTTPClient = cappedClient{o.HTTPClient}
			}
		})
}

// cappedClient caps every response body at maxListPageBytes.
type cappedClient struct{ c s3.HTTPClient }

func (c cappedClient) Do(r *http.Request) (*http.Response, error) {
	resp, err := c.c.Do(r)
	if err == nil && resp.Body != nil {
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: maxListPageBytes}
	}
	return resp, err
}

// cappedBody fails a read once more than its bytes would pass.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if int64(n) > b.left {
		return 0, fmt.Errorf("%w: a page of more than %d bytes", ErrListing, maxListPageBytes)
	}
	b.left -= int64(n)
	return n, err
}

// distinct refuses two objects at one path, or one object at a path
// another needs as a folder: either would have two copies write one file.
// objs is sorted by path.
func distinct(objs []Object) error {
	files := make(map[string]bool, len(objs))
	for i, o := range objs {
		if i > 0 && objs[i-1].Path == o.Path {
			return fmt.Errorf("%q is listed twice", o.Path)
		}
		files[o.Path] = true
	}
	for _, o := range objs {
		for d := path.Dir(o.Path); d != "."; d = path.Dir(d) {
			if files[d] {
				return fmt.Errorf("%q is both a file and the folder of %q", d, o.Path)
			}
		}
	}
	return nil
}

// relPath maps a listed key to its path relative to the revision's folder.
// skip means the key is the folder's placeholder or a sub-folder's, which
// hold no file.
func relPath(pre, key string) (rel string, skip bool, err error) {
	if len(key) > maxKeyLen {
		return "", false, fmt.Errorf("%w: a key of %d bytes (S3 allows %d)", ErrListing, len(key), maxKeyLen)
	}
	rel, ok := strings.CutPrefix(key, pre)
	if !ok {
		return "", false, fmt.Errorf("%w: key %q is outside the prefix %q asked for", ErrListing, key, pre)
	}
	if rel == "" || strings.HasSuffix(rel, "/") {
		return "", true, nil
	}
	if strings.ContainsAny(rel, "\\\x00") || path.IsAbs(rel) || path.Clean(rel) != rel {
		return "", false, fmt.Errorf("modelsync: object key %q %w", key, ErrUnsafeKey)
	}
	for seg := range strings.SplitSeq(rel, "/") {
		switch {
		case seg == ".." || seg == "." || seg == "":
			return "", false, fmt.Errorf("modelsync: object key %q %w", key, ErrUnsafeKey)
		case len(seg) > maxSegmentLen:
			return "", false, fmt.Errorf("modelsync: object key %q %w: a segment of %d bytes (at most %d)", key, ErrUnsafeKey, len(seg), maxSegmentLen)
		case reserved(seg):
			return "", false, fmt.Errorf("modelsync: object key %q %w", key, ErrReservedName)
		}
	}
	return rel, false, nil
}

// reserved reports whether a path segment is one of modelsync's own names.
func reserved(seg string) bool {
	return strings.HasPrefix(seg, reservedPrefix) || strings.HasSuffix(seg, partialSuffix)
}
