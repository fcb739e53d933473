package urlguard

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/llmplat/llmplat/runtime/jsonscan"
)

// found is a string that looks like a URL, and where it was.
type found struct {
	at    []step
	value string
}

// path names where the string was: "messages[0].content[1].image_url.url".
func (f found) path() string {
	var b strings.Builder
	for _, s := range f.at {
		if !s.isKey {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		key, _ := jsonscan.AppendString(nil, s.key) // a key of a valid document decodes
		b.Write(key)
	}
	return b.String()
}

// step is one level of a path: an object's key as written (quotes and
// escapes kept), or an array's index.
type step struct {
	key   []byte
	index int
	isKey bool
}

// collect returns the string values of body, well-formed JSON, that look
// like absolute URLs, at most MaxURLs+1 of them: CheckJSON refuses more.
// It reads body once, in place, without decoding it: only a string that
// may hold a scheme's colon is decoded, and each URL found keeps a copy
// of the steps to it, not a path string. A path built at every level
// cost the length of a long key once for every value below it; a decode
// into interfaces, tens of bytes for every byte of "[0,0,0...".
func collect(body []byte) []found {
	var (
		urls    []found
		at      []step
		wantKey bool   // the next string is an object's key
		text    []byte // a decoded string, reused
	)
	for i := 0; i < len(body) && len(urls) <= MaxURLs; {
		switch c := body[i]; c {
		case '{':
			at = append(at, step{isKey: true})
			wantKey = true
			i++
		case '[':
			at = append(at, step{})
			wantKey = false
			i++
		case '}', ']':
			at = at[:len(at)-1]
			wantKey = false
			i++
		case ',':
			top := &at[len(at)-1]
			if !top.isKey {
				top.index++
			}
			wantKey = top.isKey
			i++
		case '"':
			end := stringEnd(body, i)
			switch raw := body[i:end]; {
			case wantKey:
				at[len(at)-1].key = raw
				wantKey = false
			case bytes.ContainsAny(raw, `:\`):
				// A URL has a scheme's colon, written as such or escaped.
				text, _ = jsonscan.AppendString(text[:0], raw)
				if s := string(text); looksLikeURL(s) {
					urls = append(urls, found{at: slices.Clone(at), value: s})
				}
			}
			i = end
		default: // space, ':', or a number or literal's byte
			i++
		}
	}
	return urls
}

// stringEnd returns the index after the well-formed string at i.
func stringEnd(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(d)
}
