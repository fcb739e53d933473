package strictjson

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/jsonvariant"
)

// nesting is a way to nest JSON: open and close are one level's text
// (levels of them), around a scalar.
type nesting struct {
	name        string
	open, close string
	levels      int
	typ         reflect.Type
	prefix      string // text before the nest, with its own levels
	prefixDepth int
	suffix      string
}

// nestings are the shapes a hostile body nests in: arrays, objects with
// plain keys (the scanner's path), objects with escaped keys (explain's
// path), both mixed, and a nest inside a typed field of a request.
var nestings = []nesting{
	{name: "arrays", open: `[`, close: `]`, levels: 1},
	{name: "objects", open: `{"a":`, close: `}`, levels: 1},
	{name: "escaped keys", open: `{"\u0061":`, close: `}`, levels: 1},
	{name: "mixed", open: `{"a":[`, close: `]}`, levels: 2},
	{name: "long keys", open: `{"` + strings.Repeat("k", 200) + `":`, close: `}`, levels: 1},
	{name: "in a message", open: `[`, close: `]`, levels: 1, typ: reflect.TypeFor[request](),
		prefix: `{"model":"m","messages":[{"role":"user","content":`, prefixDepth: 3, suffix: `}]}`},
	{name: "variant key in a message", open: `{"\u0061":`, close: `}`, levels: 1, typ: reflect.TypeFor[request](),
		prefix: `{"model":"m","messages":[{"ROLE":"user","content":`, prefixDepth: 3, suffix: `}]}`},
}

// body returns the document n levels deep in all.
func (s nesting) body(n int) []byte {
	k := (n - s.prefixDepth) / s.levels
	return []byte(s.prefix + strings.Repeat(s.open, k) + "0" + strings.Repeat(s.close, k) + s.suffix)
}

// TestCheckRefusesDeepNesting: a document nested past MaxDepth is
// refused with ErrTooDeep by the scanner and by explain alike, whatever
// it nests in; one MaxDepth deep is judged as before.
func TestCheckRefusesDeepNesting(t *testing.T) {
	for _, s := range nestings {
		t.Run(s.name, func(t *testing.T) {
			// A fault before the nest is reported first, as it comes.
			variant := strings.Contains(s.prefix, "ROLE")
			for name, check := range map[string]func([]byte, reflect.Type) error{"Check": Check, "explain": explain} {
				var e *Error
				err := check(s.body(MaxDepth+s.levels), s.typ)
				if variant != errors.As(err, &e) || !variant && !errors.Is(err, ErrTooDeep) {
					t.Errorf("%s(%d levels) = %v, want ErrTooDeep (or the variant key: %v)", name, MaxDepth+s.levels, err, variant)
				}
				err = check(s.body(MaxDepth), s.typ)
				if variant != errors.As(err, &e) || !variant && err != nil {
					t.Errorf("%s(%d levels) = %v, want nil (or the variant key: %v)", name, MaxDepth, err, variant)
				}
			}
		})
	}
}

// allocated returns the bytes one call of f allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// hostileBodies are documents of about size bytes in every shape: the
// nestings as deep as the bytes allow, and wide ones whose keys or
// values send the check to explain.
func hostileBodies(size int) map[string][]byte {
	bodies := map[string][]byte{}
	for _, s := range nestings {
		levels := (size - len(s.prefix) - len(s.suffix)) / (len(s.open) + len(s.close)) * s.levels
		bodies["deep "+s.name] = s.body(levels + s.prefixDepth)
	}
	wide := func(item string) []byte {
		var b strings.Builder
		b.WriteString(`{"\u0061":0,"free":[`)
		for i := 0; b.Len() < size; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, item, i)
		}
		b.WriteString(`]}`)
		return []byte(b.String())
	}
	bodies["wide arrays"] = wide(`[%d]`)
	bodies["wide escaped objects"] = wide(`{"\u0061":%d}`)
	bodies["wide objects"] = wide(`{"k%d":0}`)
	bodies["wide numbers"] = wide(`%d`)
	bodies["dense scalars"] = []byte(`{"\u0061":0,"free":[0` + strings.Repeat(",0", size/2) + `]}`)
	return bodies
}

// maxBytesPerByte bounds what Check allocates per byte of a document.
// The scanner allocates nothing; explain's tokenizer allocates about 130
// bytes per scalar token (a syntax error it builds and drops for the
// byte after each value, the token, its boxing), so "[0,0,0..." costs up
// to 70 bytes per byte. All of it is garbage at once: what stays live is
// the decoder's copy of the document and one step per level.
const maxBytesPerByte = 96

// maxFixedBytes is what Check may allocate beyond that whatever the
// size: a decoder's buffers, a struct's fields.
const maxFixedBytes = 64 << 10

// TestCheckMemoryIsLinear: checking a document costs memory linear in its
// size, whatever its nesting. Paths built at every level used to make a
// 100 KB body of nested arrays cost over 100 MB.
func TestCheckMemoryIsLinear(t *testing.T) {
	for _, size := range []int{100 << 10, 1 << 20} {
		for name, body := range hostileBodies(size) {
			t.Run(fmt.Sprintf("%s %d KiB", name, size>>10), func(t *testing.T) {
				got := allocated(func() { _ = Check(body, reflect.TypeFor[request]()) })
				t.Logf("%d bytes allocated for a %d-byte body", got, len(body))
				if limit := uint64(maxBytesPerByte*len(body) + maxFixedBytes); got > limit {
					t.Errorf("Check allocated %d bytes for a %d-byte body, want at most %d", got, len(body), limit)
				}
			})
		}
	}
}

// BenchmarkNestedBody reports Check's bytes/op for bodies of each shape
// and size: they grow with the size, never with its square.
func BenchmarkNestedBody(b *testing.B) {
	for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
		for name, body := range hostileBodies(size) {
			b.Run(fmt.Sprintf("%s/%dKiB", strings.ReplaceAll(name, " ", "_"), size>>10), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					_ = Check(body, reflect.TypeFor[request]())
				}
			})
		}
	}
}

// FuzzCheckBounded: whatever the document, Check allocates at most
// maxBytesPerByte per byte of it, and refuses one nested past MaxDepth.
func FuzzCheckBounded(f *testing.F) {
	for _, size := range []int{1 << 10, 16 << 10} {
		for _, body := range hostileBodies(size) {
			f.Add(body)
		}
	}
	for _, s := range nestings {
		f.Add(s.body(MaxDepth))
		f.Add(s.body(MaxDepth + s.levels))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var err error
		got := allocated(func() { err = Check(data, reflect.TypeFor[request]()) })
		if limit := uint64(maxBytesPerByte*len(data) + maxFixedBytes); got > limit {
			t.Fatalf("Check allocated %d bytes for %d bytes, want at most %d", got, len(data), limit)
		}
		if err == nil && jsonvariant.Depth(data) > MaxDepth {
			t.Fatalf("Check accepted a document %d deep", jsonvariant.Depth(data))
		}
	})
}
