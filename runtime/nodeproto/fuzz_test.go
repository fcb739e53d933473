package nodeproto

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzDecode feeds Decode arbitrary bytes. It must never panic; it fails
// only with the package's error classes; whatever it accepts is valid and
// re-encodes to a canonical form that is a fixed point; and the fast chunk
// path agrees with the generic one on every input it takes.
func FuzzDecode(f *testing.F) {
	goldens, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, g := range goldens {
		b, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, tt := range decodeErrorCases(f) {
		if len(tt.in) < 4096 {
			f.Add(tt.in)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b) // Decode must not write to its input
		frame, err := Decode(b)
		if !bytes.Equal(in, b) {
			t.Fatal("Decode modified its input")
		}
		if fast, ok := decodeChunkFast(b); ok {
			slow, err := decodeSlow(b)
			if err != nil || !reflect.DeepEqual(Frame(fast), slow) {
				t.Fatalf("fast path took %q as %#v; slow path gives %#v, %v", b, fast, slow, err)
			}
		}
		if err != nil {
			if frame != nil {
				t.Fatalf("Decode returned a frame and error %v", err)
			}
			if !isCodecError(err) {
				t.Fatalf("Decode error %v has no class", err)
			}
			return
		}
		if err := frame.Validate(); err != nil {
			t.Fatalf("Decode accepted an invalid frame: %v", err)
		}
		enc, err := Encode(frame)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)): %v", b, err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(%s): %v", enc, err)
		}
		enc2, err := Encode(again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("canonical form is not a fixed point:\n%s\n%s (%v)", enc, enc2, err)
		}
	})
}

func isCodecError(err error) bool {
	for _, class := range []error{ErrMalformed, ErrInvalid, ErrVersion, ErrUnknownType, ErrTooLarge} {
		if errors.Is(err, class) {
			return true
		}
	}
	return false
}
