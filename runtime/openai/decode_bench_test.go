package openai

import (
	"encoding/json"
	"testing"
)

// BenchmarkRequestDecode compares the decode with the former one on the
// small and the larger request of decodeBodies. The former one here
// decodes its messages as Message does now, so it understates the gain.
func BenchmarkRequestDecode(b *testing.B) {
	for i, name := range []string{"small", "large"} {
		body := []byte(decodeBodies[i])
		b.Run(name+"/new", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r ChatCompletionRequest
				if err := json.Unmarshal(body, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/ref", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r refRequest
				if err := json.Unmarshal(body, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRequestEncode compares the encoding of a request with an
// extra field (the larger one's top_k) with the former one.
func BenchmarkRequestEncode(b *testing.B) {
	var r ChatCompletionRequest
	if err := json.Unmarshal([]byte(decodeBodies[1]), &r); err != nil {
		b.Fatal(err)
	}
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ref", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := refWithExtra(requestFields(r), r.Extra); err != nil {
				b.Fatal(err)
			}
		}
	})
}
